#include "kernels/accept/packed_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/accept/accept_algorithm.h"
#include "spec/rng.h"
#include "spec/tree_acceptance.h"

namespace tandem {
namespace accept {

static_assert(kRuleGreedy == static_cast<int>(spec::AcceptanceRule::kGreedy) &&
                  kRuleRejection == static_cast<int>(spec::AcceptanceRule::kRejection) &&
                  kRuleThreshold == static_cast<int>(spec::AcceptanceRule::kThreshold) &&
                  kRuleRatio == static_cast<int>(spec::AcceptanceRule::kRatio) &&
                  kRulePosition == static_cast<int>(spec::AcceptanceRule::kPosition) &&
                  kRuleTypical == static_cast<int>(spec::AcceptanceRule::kTypical) &&
                  kRuleCoupled == static_cast<int>(spec::AcceptanceRule::kCoupled),
              "accept_algorithm.h rule codes follow spec::AcceptanceRule");
static_assert(kStreamDraft == static_cast<uint32_t>(spec::RandomStream::kDraftSample) &&
                  kStreamAccept == static_cast<uint32_t>(spec::RandomStream::kAccept) &&
                  kStreamResample == static_cast<uint32_t>(spec::RandomStream::kResample) &&
                  kStreamGumbel == static_cast<uint32_t>(spec::RandomStream::kGumbel),
              "accept_algorithm.h streams follow spec::RandomStream");

namespace {

PackedSampling Pack(const spec::SamplingConfig& config) {
  PackedSampling packed;
  packed.temperature = config.temperature;
  packed.top_k = config.top_k;
  packed.top_p = config.top_p;
  return packed;
}

}  // namespace

PackedBatch PackChains(absl::Span<const VerifyChain> chains) {
  PackedBatch batch;
  batch.chains.reserve(chains.size());
  batch.q_begin.push_back(0);
  for (const VerifyChain& chain : chains) {
    PackedChain packed;
    packed.first_row = chain.first_row;
    packed.num_proposals = static_cast<int32_t>(chain.proposals.size());
    packed.proposal_begin = static_cast<int32_t>(batch.tokens.size());
    packed.output_begin = batch.num_outputs;
    packed.sampling = Pack(chain.sampling);
    packed.rule = static_cast<int32_t>(chain.params.rule);
    packed.alpha = spec::AlphaOrDefault(chain.params);
    packed.theta_first = chain.params.theta_first;
    packed.theta_last = chain.params.theta_last;
    packed.epsilon = chain.params.epsilon;
    packed.delta = chain.params.delta;
    packed.want_logprobs = chain.want_logprobs ? 1 : 0;
    packed.seed = chain.key.seed;
    packed.sample_index = chain.key.sample_index;
    packed.position = chain.key.position;
    packed.is_tree = chain.parents.empty() ? 0 : 1;
    batch.any_rejection_tree |= packed.is_tree && packed.rule == kRuleRejection;
    for (size_t i = 0; i < chain.proposals.size(); ++i) {
      const spec::Proposal& proposal = chain.proposals[i];
      batch.parents.push_back(packed.is_tree ? chain.parents[i] : static_cast<int32_t>(i) - 1);
      batch.tokens.push_back(proposal.token);
      const size_t n = std::min(proposal.q.ids.size(), proposal.q.probs.size());
      batch.q_ids.insert(batch.q_ids.end(), proposal.q.ids.begin(), proposal.q.ids.begin() + n);
      batch.q_probs.insert(batch.q_probs.end(), proposal.q.probs.begin(),
                           proposal.q.probs.begin() + n);
      batch.q_begin.push_back(static_cast<int32_t>(batch.q_ids.size()));
    }
    batch.num_outputs += packed.num_proposals + 1;
    batch.chains.push_back(packed);
  }
  return batch;
}

void ResizeOutputs(const PackedBatch& batch, PackedOutputs* outputs) {
  outputs->tokens.assign(batch.num_outputs, -1);
  outputs->logprobs.assign(batch.num_outputs, 0.0f);
  outputs->path.assign(batch.num_outputs, -1);
  outputs->status.assign(batch.chains.size(), PackedStatus());
}

absl::Status UnpackOutcomes(const PackedBatch& batch, const PackedOutputs& outputs,
                            std::vector<VerifyOutcome>* outcomes) {
  outcomes->clear();
  outcomes->resize(batch.chains.size());
  for (size_t c = 0; c < batch.chains.size(); ++c) {
    const PackedChain& chain = batch.chains[c];
    const PackedStatus& status = outputs.status[c];
    VerifyOutcome& out = (*outcomes)[c];
    if (status.error_index >= 0) {
      if (status.error_index > chain.num_proposals) {
        return absl::InternalError(absl::StrCat("verify accept: chain ", c, " error index ",
                                                status.error_index,
                                                " past K = ", chain.num_proposals));
      }
      out.status = chain.is_tree ? spec::TreeNoMassError(status.error_index - 1)
                                 : absl::InvalidArgumentError(absl::StrCat(
                                       "acceptance: target distribution ", status.error_index,
                                       " has no positive probability"));
      continue;
    }
    if (status.num_committed < 1 || status.num_committed > chain.num_proposals + 1 ||
        status.num_accepted != status.num_committed - 1) {
      return absl::InternalError(absl::StrCat(
          "verify accept: chain ", c, " reports ", status.num_committed, " committed and ",
          status.num_accepted, " accepted for K = ", chain.num_proposals));
    }
    const auto begin = outputs.tokens.begin() + chain.output_begin;
    out.committed.assign(begin, begin + status.num_committed);
    out.num_accepted = status.num_accepted;
    for (int j = 0; j < out.num_accepted; ++j) {
      const int node = chain.is_tree ? outputs.path[chain.output_begin + j] : j;
      const int parent = j == 0 ? -1 : out.path[j - 1];
      if (node < 0 || node >= chain.num_proposals ||
          batch.parents[chain.proposal_begin + node] != parent) {
        return absl::InternalError(absl::StrCat("verify accept: chain ", c, " reports node ", node,
                                                " at depth ", j + 1, ", not a child of ", parent));
      }
      out.path.push_back(node);
    }
    if (chain.want_logprobs) {
      const auto lp = outputs.logprobs.begin() + chain.output_begin;
      out.logprobs.assign(lp, lp + status.num_committed);
    }
  }
  return absl::OkStatus();
}

PackedDrafts PackDrafts(absl::Span<const DraftRow> drafts) {
  PackedDrafts packed;
  packed.rows.reserve(drafts.size());
  for (const DraftRow& draft : drafts) {
    PackedDraftRow row;
    row.row = draft.row;
    row.q_size = draft.q_size;
    row.output_begin = packed.num_q_slots;
    row.sampling = Pack(draft.sampling);
    row.coupled = draft.coupled ? 1 : 0;
    row.seed = draft.seed;
    row.position = draft.position;
    packed.num_q_slots += draft.q_size;
    packed.rows.push_back(row);
  }
  return packed;
}

void ResizeDraftOutputs(const PackedDrafts& drafts, PackedDraftOutputs* outputs) {
  outputs->tokens.assign(drafts.rows.size(), -1);
  outputs->q_counts.assign(drafts.rows.size(), 0);
  outputs->q_ids.assign(drafts.num_q_slots, -1);
  outputs->q_probs.assign(drafts.num_q_slots, 0.0f);
}

absl::Status UnpackDrafts(const PackedDrafts& drafts, const PackedDraftOutputs& outputs,
                          std::vector<DraftProposal>* proposals) {
  proposals->clear();
  proposals->resize(drafts.rows.size());
  for (size_t i = 0; i < drafts.rows.size(); ++i) {
    const PackedDraftRow& row = drafts.rows[i];
    DraftProposal& out = (*proposals)[i];
    const int count = outputs.q_counts[i];
    out.token = outputs.tokens[i];
    if (out.token < 0) {
      out.token = -1;
      out.status = NoDraftTokenError(i);
      continue;
    }
    if (count < 1 || count > row.q_size) {
      return absl::InternalError(absl::StrCat("draft sampling: row ", i, " reports ", count,
                                              " q entries for q_size ", row.q_size));
    }
    const auto ids = outputs.q_ids.begin() + row.output_begin;
    const auto probs = outputs.q_probs.begin() + row.output_begin;
    out.q.ids.assign(ids, ids + count);
    out.q.probs.assign(probs, probs + count);
  }
  return absl::OkStatus();
}

}  // namespace accept
}  // namespace tandem
