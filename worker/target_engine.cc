#include "worker/target_engine.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {
namespace {

// Outcome of acceptance for one sequence: committed tokens, the logit row (within the
// sequence's K + 1 rows) each was drawn from, and the accepted proposal indices.
struct Accepted {
  std::vector<int32_t> committed;
  std::vector<int> rows;
  std::vector<int> accepted;
};

spec::Proposal ToProposal(const v1::ProposedToken& p) {
  spec::Proposal out;
  out.token = p.token();
  out.q.ids.assign(p.q_ids().begin(), p.q_ids().end());
  out.q.probs.assign(p.q_probs().begin(), p.q_probs().end());
  return out;
}

// Runs the rule over the proposals `path` (indices, a root-to-node chain) whose logit
// rows are 0 (the last committed token) and path[i] + 1.
absl::StatusOr<Accepted> AcceptPath(const v1::VerifySequence& seq, const std::vector<int>& path,
                                    const std::vector<std::vector<float>>& probs,
                                    const spec::AcceptanceParams& params) {
  std::vector<spec::Proposal> proposals;
  std::vector<absl::Span<const float>> spans = {probs[0]};
  std::vector<int> rows = {0};
  for (int j : path) {
    proposals.push_back(ToProposal(seq.proposals(j)));
    spans.push_back(probs[j + 1]);
    rows.push_back(j + 1);
  }
  absl::StatusOr<spec::AcceptanceResult> result = spec::AcceptProposals(
      proposals, spans, params, spec::RandomKey{seq.sampling().seed(), seq.sample_index()});
  if (!result.ok()) return result.status();
  Accepted out;
  out.committed = std::move(result->committed);
  out.rows.assign(rows.begin(), rows.begin() + out.committed.size());
  out.accepted.assign(path.begin(), path.begin() + result->num_accepted);
  return out;
}

// A chain: the proposals in order. A tree: every root-to-leaf path is run as a chain
// (the position rule's K is that path's length) and the path that accepts the most
// proposals wins (ties: the lowest leaf index). Rejection sampling is not offered on
// trees (validation answers UNIMPLEMENTED): the best of several paths would not keep
// the target distribution.
absl::StatusOr<Accepted> Accept(const v1::VerifySequence& seq,
                                const std::vector<std::vector<float>>& probs) {
  absl::StatusOr<spec::AcceptanceParams> params = ToAcceptanceParams(seq.sampling());
  if (!params.ok()) return params.status();
  const int k = seq.proposals_size();
  if (seq.proposal_parents_size() == 0) {
    std::vector<int> chain(k);
    for (int i = 0; i < k; ++i) chain[i] = i;
    return AcceptPath(seq, chain, probs, *params);
  }
  std::vector<bool> has_child(k, false);
  for (int j = 0; j < k; ++j) {
    if (seq.proposal_parents(j) >= 0) has_child[seq.proposal_parents(j)] = true;
  }
  absl::StatusOr<Accepted> best = absl::InternalError("verify: a tree without leaves");
  for (int leaf = 0; leaf < k; ++leaf) {
    if (has_child[leaf]) continue;
    std::vector<int> path;
    for (int j = leaf; j >= 0; j = seq.proposal_parents(j)) path.push_back(j);
    std::reverse(path.begin(), path.end());
    absl::StatusOr<Accepted> result = AcceptPath(seq, path, probs, *params);
    if (!result.ok()) return result.status();
    if (!best.ok() || result->accepted.size() > best->accepted.size()) best = std::move(result);
  }
  return best;
}

}  // namespace

TargetEngine::TargetEngine(ModelExecutor* executor) : executor_(executor) {}

absl::StatusOr<v1::VerifyResponse> TargetEngine::Verify(const v1::VerifyRequest& request) {
  const int vocab = executor_->config().vocab_size;
  const ExecutorTimes before = executor_->times();
  std::vector<SequenceInput> batch;
  batch.reserve(request.sequences_size());
  for (const v1::VerifySequence& seq : request.sequences()) {
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(seq.start_position());
    in.tokens.assign(seq.tokens().begin(), seq.tokens().end());
    const int n = static_cast<int>(in.tokens.size());
    const int k = seq.proposals_size();
    for (const v1::ProposedToken& p : seq.proposals()) in.tokens.push_back(p.token());
    for (int i = 0; i <= k; ++i) in.logit_indices.push_back(n - 1 + i);
    if (seq.proposal_parents_size() > 0) {
      for (int i = 0; i < n; ++i) in.parents.push_back(i - 1);
      for (int32_t p : seq.proposal_parents()) in.parents.push_back(p < 0 ? n - 1 : n + p);
    }
    batch.push_back(std::move(in));
  }
  std::vector<float> logits;
  absl::Status status = executor_->Forward(batch, &logits);
  if (!status.ok()) return status;

  v1::VerifyResponse response;
  size_t row_offset = 0;  // First logit row of the current sequence.
  std::vector<std::vector<float>> probs;
  std::vector<float> seq_logits;
  for (int s = 0; s < request.sequences_size() && status.ok(); ++s) {
    const v1::VerifySequence& seq = request.sequences(s);
    const int n = seq.tokens_size(), k = seq.proposals_size();
    seq_logits.assign(logits.begin() + row_offset * vocab,
                      logits.begin() + (row_offset + k + 1) * vocab);
    row_offset += k + 1;
    const bool greedy = IsGreedy(seq.sampling());
    const bool tree = seq.proposal_parents_size() > 0;
    probs.resize(k + 1);
    for (int i = 0; i <= k; ++i) {
      spec::ProcessLogits(absl::MakeConstSpan(seq_logits.data() + size_t(i) * vocab, vocab),
                          ToSamplingConfig(seq.sampling()), &probs[i]);
    }
    absl::StatusOr<Accepted> accepted = Accept(seq, probs);
    if (!accepted.ok()) {
      status = absl::Status(accepted.status().code(),
                            absl::StrCat("verify: sequence ", seq.sequence_id(), ": ",
                                         accepted.status().message()));
      break;
    }
    const int num_accepted = static_cast<int>(accepted->accepted.size());
    if (tree) {
      std::vector<int32_t> keep;
      for (int i = 0; i < n; ++i) keep.push_back(i);
      for (int j : accepted->accepted) keep.push_back(n + j);
      status = executor_->KeepPath(seq.sequence_id(), static_cast<int>(seq.start_position()),
                                   keep);
    } else {
      status = executor_->Truncate(seq.sequence_id(),
                                   static_cast<int>(seq.start_position()) + n + num_accepted);
    }
    if (!status.ok()) break;
    v1::VerifiedSequence* out = response.add_sequences();
    out->set_sequence_id(seq.sequence_id());
    out->mutable_committed()->Assign(accepted->committed.begin(), accepted->committed.end());
    out->set_num_accepted(num_accepted);
    out->set_cached_length(seq.start_position() + n + num_accepted);
    if (seq.sampling().return_logprobs()) {
      for (size_t j = 0; j < accepted->committed.size(); ++j) {
        const int row = accepted->rows[j];
        out->add_logprobs(static_cast<float>(spec::CommittedLogProb(
            absl::MakeConstSpan(seq_logits.data() + size_t(row) * vocab, vocab), probs[row],
            accepted->committed[j], greedy)));
      }
    }
  }
  if (!status.ok()) {
    // Leave no half-verified sequence behind: back to the state before the call.
    for (const SequenceInput& in : batch) (void)executor_->Truncate(in.seq_id, in.start_position);
    return status;
  }
  const ExecutorTimes after = executor_->times();
  const double collective = after.collective_ms - before.collective_ms;
  response.set_collective_ms(static_cast<float>(collective));
  response.set_compute_ms(
      static_cast<float>(after.forward_ms - before.forward_ms - collective));
  return response;
}

absl::StatusOr<v1::PrefillResponse> RunPrefill(ModelExecutor* executor,
                                               const v1::PrefillRequest& request) {
  std::vector<SequenceInput> batch;
  batch.reserve(request.sequences_size());
  for (const v1::PrefillSequence& seq : request.sequences()) {
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(seq.start_position());
    in.tokens.assign(seq.tokens().begin(), seq.tokens().end());
    batch.push_back(std::move(in));
  }
  std::vector<float> logits;
  absl::Status status = executor->Forward(batch, &logits);
  if (!status.ok()) return status;
  v1::PrefillResponse response;
  for (const SequenceInput& in : batch) {
    response.add_cached_lengths(static_cast<uint32_t>(in.start_position + in.tokens.size()));
  }
  return response;
}

}  // namespace worker
}  // namespace tandem
