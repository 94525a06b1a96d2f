#include "worker/request_validation.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/accept/draft_sample.h"
#include "spec/sampling.h"
#include "spec/tree_acceptance.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {
namespace {

std::string Where(int index, uint64_t id) {
  return absl::StrCat("sequences[", index, "] (id ", id, ")");
}

absl::Status CheckDistinct(absl::flat_hash_set<uint64_t>& seen, int index, uint64_t id) {
  if (!seen.insert(id).second) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(index, id), ": sequence id appears twice in the request"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokens(const google::protobuf::RepeatedField<int32_t>& tokens,
                         const RequestLimits& limits, const std::string& where) {
  if (tokens.empty()) return absl::InvalidArgumentError(where + ": tokens is empty");
  for (int i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": tokens[", i, "] = ", tokens[i],
                                                     " is outside the vocabulary [0, ",
                                                     limits.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

// start_position against the cache, and the last position against the context.
absl::Status CheckPositions(uint64_t id, uint32_t start, int64_t new_positions,
                            const RequestLimits& limits, const CachedLengthFn& cached_length,
                            const std::string& where) {
  absl::StatusOr<int> cached = cached_length(id);
  if (!cached.ok()) {
    if (!absl::IsNotFound(cached.status())) return cached.status();
    if (start != 0) {
      return absl::NotFoundError(absl::StrCat(where, ": unknown sequence ", id,
                                              ": was the worker restarted? (start_position ", start,
                                              " needs a cached sequence)"));
    }
  } else if (static_cast<int64_t>(start) > *cached) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": start_position ", start, " is past the cached length ", *cached));
  }
  if (int64_t{start} + new_positions > limits.context_length) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": positions up to ", int64_t{start} + new_positions - 1,
                     " exceed the context length ", limits.context_length));
  }
  return absl::OkStatus();
}

absl::Status CheckRows(int64_t rows, const RequestLimits& limits, const char* what) {
  if (rows > limits.max_batch_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(what, " needs ", rows,
                                                     " positions in one forward pass, over "
                                                     "max_batch_tokens ",
                                                     limits.max_batch_tokens));
  }
  return absl::OkStatus();
}

absl::Status CheckSampling(const v1::SequenceSampling& sampling, const RequestLimits& limits,
                           const std::string& where) {
  absl::Status status = spec::ValidateSamplingConfig(ToSamplingConfig(sampling), limits.vocab_size);
  if (!status.ok()) return absl::InvalidArgumentError(where + ": " + std::string(status.message()));
  return absl::OkStatus();
}

absl::Status CheckNotEmpty(int sequences) {
  if (sequences == 0) return absl::InvalidArgumentError("the request has no sequences");
  return absl::OkStatus();
}

// The checks every sequence of a Prefill/Draft/Verify request gets (a non-empty
// request, distinct ids, tokens inside the vocabulary), then `check(seq, where)`, which
// does the request's own checks and returns the sequence's rows. Returns the total rows
// or the first error.
template <typename Sequences, typename Check>
absl::StatusOr<int64_t> CheckEachSequence(const Sequences& sequences, const RequestLimits& limits,
                                          Check check) {
  TANDEM_RETURN_IF_ERROR(CheckNotEmpty(sequences.size()));
  absl::flat_hash_set<uint64_t> seen;
  int64_t rows = 0;
  for (int s = 0; s < sequences.size(); ++s) {
    const auto& seq = sequences.Get(s);
    const std::string where = Where(s, seq.sequence_id());
    TANDEM_RETURN_IF_ERROR(CheckDistinct(seen, s, seq.sequence_id()));
    TANDEM_RETURN_IF_ERROR(CheckTokens(seq.tokens(), limits, where));
    absl::StatusOr<int64_t> sequence_rows = check(seq, where);
    if (!sequence_rows.ok()) return sequence_rows.status();
    rows += *sequence_rows;
  }
  return rows;
}

// A branch (fork_from set) forks from a sequence the request does not draft.
absl::Status CheckFork(const v1::DraftRequest& request, const v1::DraftSequence& seq,
                       const std::string& where) {
  if (seq.fork_from() == 0) return absl::OkStatus();
  for (const v1::DraftSequence& other : request.sequences()) {
    if (other.sequence_id() == seq.fork_from()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": fork_from ", seq.fork_from(),
                       " is a sequence of this request (fork from one it does not draft)"));
    }
  }
  return absl::OkStatus();
}

// A dynamic tree (tree_nodes > 0): budget, width, a point-mass rule, no branch or top
// tokens. The rows of its widest pass (the frontier, one row per node); 0 for a chain.
absl::StatusOr<int64_t> CheckDraftTree(const v1::DraftSequence& seq, const RequestLimits& limits,
                                       const std::string& where) {
  if (seq.tree_nodes() == 0) {
    if (seq.tree_width() == 0) return 0;
    return absl::InvalidArgumentError(absl::StrCat(where, ": tree_width ", seq.tree_width(),
                                                   " without tree_nodes (0 = a chain)"));
  }
  if (seq.tree_nodes() > static_cast<uint32_t>(limits.max_speculative_tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": tree_nodes ", seq.tree_nodes(), " is outside [0, ",
                     limits.max_speculative_tokens, "] (max_speculative_tokens)"));
  }
  if (seq.tree_width() < 1 || seq.tree_width() > static_cast<uint32_t>(kMaxDraftTop)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": tree_width ", seq.tree_width(),
                                                   " is outside [1, ", kMaxDraftTop, "]"));
  }
  if (!IsGreedy(seq.sampling()) && seq.sampling().rule() != v1::ACCEPTANCE_RULE_COUPLED) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": tree_nodes needs point-mass nodes: greedy or the coupled rule"));
  }
  if (seq.fork_from() != 0 || seq.num_top() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a tree (tree_nodes) takes neither fork_from nor num_top"));
  }
  return seq.tree_width();
}

}  // namespace

absl::Status ValidateProposal(const v1::ProposedToken& proposal, int vocab_size,
                              const std::string& where) {
  if (proposal.token() < 0 || proposal.token() >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": token ", proposal.token(), " is outside the vocabulary [0, ", vocab_size, ")"));
  }
  if (proposal.q_ids_size() != proposal.q_probs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", proposal.q_ids_size(), " q_ids but ", proposal.q_probs_size(), " q_probs"));
  }
  if (proposal.q_ids_size() == 0) {
    return absl::InvalidArgumentError(where +
                                      ": q is empty (give at least the token with probability 1)");
  }
  absl::flat_hash_set<int32_t> seen;
  double sum = 0;
  float token_prob = 0;
  for (int j = 0; j < proposal.q_ids_size(); ++j) {
    const int32_t id = proposal.q_ids(j);
    const float p = proposal.q_probs(j);
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": q_ids[", j, "] = ", id, " is outside the vocabulary"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": q_ids[", j, "] = ", id, " appears twice"));
    }
    if (!std::isfinite(p) || p < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": q_probs[", j, "] = ", p, " is not a probability"));
    }
    sum += p;
    if (id == proposal.token()) token_prob = p;
  }
  if (std::fabs(sum - 1.0) > kProposalSumTolerance) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": q_probs sum to ", sum, ", not 1"));
  }
  if (!(token_prob > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": the proposed token ", proposal.token(),
                                                   " is not in the support of q"));
  }
  return absl::OkStatus();
}

namespace {

// A tree (proposal_parents given): one parent per proposal, then spec::ValidateTreeProposals
// (parents in [-1, i), so no cycle; distinct sibling tokens; under rejection each sibling's
// q without its earlier siblings' tokens), INVALID_ARGUMENT naming the node otherwise. The
// proposals themselves were checked by ValidateProposal.
absl::Status CheckTree(const v1::VerifySequence& seq, spec::AcceptanceRule rule,
                       const RequestLimits& limits, const std::string& where) {
  const int k = seq.proposals_size();
  if (seq.proposal_parents_size() != k) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", seq.proposal_parents_size(),
                                                   " proposal_parents for ", k, " proposals"));
  }
  // The acceptable prefix is a tree of its own; the computed-only rest only needs its
  // parents in [-1, i) (it is never accepted, so its siblings may repeat tokens).
  const int acceptable = AcceptableProposals(seq);
  for (int i = acceptable; i < k; ++i) {
    const int32_t parent = seq.proposal_parents(i);
    if (parent < -1 || parent >= i) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": proposal_parents[", i,
                                                     "] = ", parent, " is outside [-1, ", i, ")"));
    }
  }
  std::vector<spec::Proposal> nodes;
  nodes.reserve(acceptable);
  for (int i = 0; i < acceptable; ++i) nodes.push_back(ToProposal(seq.proposals(i)));
  const std::vector<int32_t> parents(seq.proposal_parents().begin(),
                                     seq.proposal_parents().begin() + acceptable);
  const absl::Status status =
      spec::ValidateTreeProposals(parents, nodes, static_cast<size_t>(limits.vocab_size), rule);
  if (status.ok()) return status;
  return absl::InvalidArgumentError(absl::StrCat(where, ": proposal_parents: ", status.message()));
}

// proposal_positions: empty, or one per proposal in [0, context_length).
absl::Status CheckProposalPositions(const v1::VerifySequence& seq, const RequestLimits& limits,
                                    const std::string& where) {
  if (seq.proposal_positions_size() == 0) return absl::OkStatus();
  if (seq.proposal_positions_size() != seq.proposals_size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", seq.proposal_positions_size(),
                                                   " proposal_positions for ", seq.proposals_size(),
                                                   " proposals"));
  }
  for (int i = 0; i < seq.proposal_positions_size(); ++i) {
    const int32_t p = seq.proposal_positions(i);
    if (p < 0 || p >= limits.context_length) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": proposal_positions[", i, "] = ", p,
                                                     " is outside [0, ", limits.context_length,
                                                     ") (context length)"));
    }
  }
  return absl::OkStatus();
}

// next_candidates: a served target-side method and max_nodes in [1, max K].
absl::Status CheckNextCandidates(const v1::VerifySequence& seq, const RequestLimits& limits,
                                 const std::string& where) {
  if (!seq.has_next_candidates()) return absl::OkStatus();
  const v1::NextCandidatesRequest& next = seq.next_candidates();
  if (!limits.serves_target_method || !limits.serves_target_method(next.method())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": next_candidates.method ", v1::SpeculationMethod_Name(next.method()),
                     " is not a target-side proposer this worker serves"));
  }
  if (next.max_nodes() < 1 || next.max_nodes() > uint32_t(limits.max_speculative_tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": next_candidates.max_nodes ", next.max_nodes(), " is outside [1, ",
                     limits.max_speculative_tokens, "] (max_speculative_tokens)"));
  }
  if (!std::isfinite(next.min_node_value()) || next.min_node_value() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": next_candidates.min_node_value ",
                                                   next.min_node_value(),
                                                   " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePrefillRequest(const v1::PrefillRequest& request, const RequestLimits& limits,
                                    const CachedLengthFn& cached_length) {
  absl::StatusOr<int64_t> rows = CheckEachSequence(
      request.sequences(), limits,
      [&](const v1::PrefillSequence& seq, const std::string& where) -> absl::StatusOr<int64_t> {
        TANDEM_RETURN_IF_ERROR(CheckPositions(seq.sequence_id(), seq.start_position(),
                                              seq.tokens_size(), limits, cached_length, where));
        return seq.tokens_size();
      });
  if (!rows.ok()) return rows.status();
  return CheckRows(*rows, limits, "the prefill");
}

absl::Status ValidateDraftRequest(const v1::DraftRequest& request, const RequestLimits& limits,
                                  const CachedLengthFn& cached_length) {
  absl::StatusOr<int64_t> rows = CheckEachSequence(
      request.sequences(), limits,
      [&](const v1::DraftSequence& seq, const std::string& where) -> absl::StatusOr<int64_t> {
        const uint32_t k = seq.num_draft_tokens();
        if (k < 1 || k > static_cast<uint32_t>(limits.max_speculative_tokens)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": num_draft_tokens ", k, " is outside [1, ",
                           limits.max_speculative_tokens, "] (max_speculative_tokens)"));
        }
        if (seq.proposal_top_k() > 256) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": proposal_top_k ", seq.proposal_top_k(), " is outside [0, 256]"));
        }
        if (seq.num_top() > static_cast<uint32_t>(kMaxDraftTop)) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": num_top ", seq.num_top(),
                                                         " is outside [0, ", kMaxDraftTop, "]"));
        }
        TANDEM_RETURN_IF_ERROR(CheckSampling(seq.sampling(), limits, where));
        TANDEM_RETURN_IF_ERROR(CheckFork(request, seq, where));
        absl::StatusOr<int64_t> tree_rows = CheckDraftTree(seq, limits, where);
        if (!tree_rows.ok()) return tree_rows.status();
        // Every proposal (a tree's nodes too) gets a position: start .. start + tokens +
        // K - 1; a branch's start is within its parent's cache.
        TANDEM_RETURN_IF_ERROR(CheckPositions(
            seq.fork_from() != 0 ? seq.fork_from() : seq.sequence_id(), seq.start_position(),
            int64_t{seq.tokens_size()} + k, limits, cached_length, where));
        return std::max<int64_t>(seq.tokens_size(), *tree_rows);
      });
  if (!rows.ok()) return rows.status();
  TANDEM_RETURN_IF_ERROR(CheckRows(*rows, limits, "the draft"));
  return CheckRows(request.sequences_size(), limits, "the draft");
}

absl::Status ValidateVerifyRequest(const v1::VerifyRequest& request, const RequestLimits& limits,
                                   const CachedLengthFn& cached_length) {
  absl::StatusOr<int64_t> rows = CheckEachSequence(
      request.sequences(), limits,
      [&](const v1::VerifySequence& seq, const std::string& where) -> absl::StatusOr<int64_t> {
        const int k = seq.proposals_size();
        if (k > limits.max_speculative_tokens) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": ", k,
                                                         " proposals, over max_speculative_tokens ",
                                                         limits.max_speculative_tokens));
        }
        TANDEM_RETURN_IF_ERROR(CheckSampling(seq.sampling(), limits, where));
        absl::StatusOr<spec::AcceptanceParams> params = ToAcceptanceParams(seq.sampling());
        if (!params.ok()) {
          return absl::InvalidArgumentError(where + ": " + std::string(params.status().message()));
        }
        for (int i = 0; i < k; ++i) {
          TANDEM_RETURN_IF_ERROR(ValidateProposal(seq.proposals(i), limits.vocab_size,
                                                  absl::StrCat(where, ": proposals[", i, "]")));
        }
        if (seq.has_num_acceptable() && seq.num_acceptable() > uint32_t(k)) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": num_acceptable ", seq.num_acceptable(), " is over the ", k, " proposals"));
        }
        if (seq.proposal_parents_size() != 0) {
          TANDEM_RETURN_IF_ERROR(CheckTree(seq, params->rule, limits, where));
        }
        TANDEM_RETURN_IF_ERROR(CheckProposalPositions(seq, limits, where));
        TANDEM_RETURN_IF_ERROR(CheckNextCandidates(seq, limits, where));
        TANDEM_RETURN_IF_ERROR(CheckPositions(seq.sequence_id(), seq.start_position(),
                                              int64_t{seq.tokens_size()} + k, limits, cached_length,
                                              where));
        return int64_t{seq.tokens_size()} + k;
      });
  if (!rows.ok()) return rows.status();
  return CheckRows(*rows, limits, "the verify");
}

absl::Status ValidateTruncateRequest(const v1::TruncateRequest& request,
                                     const CachedLengthFn& cached_length) {
  absl::flat_hash_set<uint64_t> seen;
  for (int i = 0; i < request.items_size(); ++i) {
    const auto& item = request.items(i);
    const std::string where = absl::StrCat("items[", i, "] (id ", item.sequence_id(), ")");
    if (!seen.insert(item.sequence_id()).second) {
      return absl::InvalidArgumentError(where + ": sequence id appears twice in the request");
    }
    absl::StatusOr<int> cached = cached_length(item.sequence_id());
    if (!cached.ok()) {
      if (absl::IsNotFound(cached.status())) {
        return absl::NotFoundError(absl::StrCat(where, ": unknown sequence ", item.sequence_id(),
                                                ": was the worker restarted?"));
      }
      return cached.status();
    }
    if (static_cast<int64_t>(item.length()) > *cached) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": length ", item.length(), " is past the cached length ", *cached));
    }
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
