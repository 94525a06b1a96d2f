#include "worker/draft_engine.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/accept/draft_sample.h"
#include "model/output_consumers.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {

DraftEngine::DraftEngine(ModelExecutor* executor, const DraftEngineOptions& options)
    : executor_(executor), options_(options) {}

absl::Status DraftEngine::CheckCapacity(const v1::DraftRequest& request) const {
  const KvCacheStats kv = executor_->kv_stats();
  const auto blocks = [&](int64_t length) { return (length + kv.block_size - 1) / kv.block_size; };
  int64_t needed = 0;
  for (const v1::DraftSequence& seq : request.sequences()) {
    const int64_t k = std::max<int64_t>(seq.num_draft_tokens(), 1);
    const int64_t end = int64_t{seq.start_position()} + seq.tokens_size() + k - 1;
    if (seq.fork_from() != 0) {
      // A branch shares its parent's blocks below start_position; writing a shared
      // partial block copies it first.
      const bool copy = seq.start_position() % kv.block_size != 0;
      needed += blocks(end) - blocks(seq.start_position()) + (copy ? 1 : 0);
      continue;
    }
    absl::StatusOr<int> cached = executor_->CachedLength(seq.sequence_id());
    const int64_t held = cached.ok() ? blocks(*cached) : 0;
    needed += blocks(end) - held;
  }
  if (needed > kv.free_blocks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KV cache full: drafting needs ", needed, " more blocks of ", kv.block_size,
                     " tokens but only ", kv.free_blocks, " of ", kv.total_blocks,
                     " are free; release or shorten sequences"));
  }
  return absl::OkStatus();
}

absl::Status DraftEngine::ForkBranches(const v1::DraftRequest& request) {
  for (const v1::DraftSequence& seq : request.sequences()) {
    if (seq.fork_from() == 0) continue;
    absl::Status status =
        executor_->Fork(seq.fork_from(), seq.sequence_id(), static_cast<int>(seq.start_position()));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DraftResponse> DraftEngine::Draft(const v1::DraftRequest& request) {
  if (absl::Status status = CheckCapacity(request); !status.ok()) return status;
  if (absl::Status status = ForkBranches(request); !status.ok()) return status;
  const int n = request.sequences_size();
  const double forward_ms_before = executor_->times().forward_ms;

  v1::DraftResponse response;
  // Per sequence: its sampling, q size and seed, and the position of its next proposal.
  std::vector<DraftRow> next_draft(n);
  int max_k = 0;
  std::vector<SequenceInput> batch;
  batch.reserve(n);
  for (int s = 0; s < n; ++s) {
    const v1::DraftSequence& seq = request.sequences(s);
    v1::DraftedSequence* out = response.add_sequences();
    out->set_sequence_id(seq.sequence_id());
    next_draft[s].sampling = ToSamplingConfig(seq.sampling());
    next_draft[s].q_size = seq.proposal_top_k() > 0 ? static_cast<int>(seq.proposal_top_k())
                                                    : options_.default_proposal_top_k;
    next_draft[s].coupled = seq.sampling().rule() == v1::ACCEPTANCE_RULE_COUPLED;
    next_draft[s].seed = seq.sampling().seed();
    next_draft[s].position = uint64_t{seq.start_position()} + seq.tokens_size();
    next_draft[s].top = static_cast<int>(seq.num_top());
    max_k = std::max(max_k, static_cast<int>(seq.num_draft_tokens()));
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(seq.start_position());
    in.tokens.assign(seq.tokens().begin(), seq.tokens().end());
    if (!in.tokens.empty()) in.logit_indices = {static_cast<int32_t>(in.tokens.size()) - 1};
    batch.push_back(std::move(in));
  }

  std::vector<int> rows;  // Request index of each logit row of the current pass.
  for (int s = 0; s < n; ++s) rows.push_back(s);
  std::vector<DraftRow> drafts;
  std::vector<int> drafted;  // Request index of each draft row.
  std::vector<DraftProposal> proposals;
  for (int i = 0; i < max_k; ++i) {
    drafts.clear();
    drafted.clear();
    for (size_t r = 0; r < rows.size(); ++r) {
      if (static_cast<uint32_t>(i) >= request.sequences(rows[r]).num_draft_tokens()) continue;
      drafts.push_back(next_draft[rows[r]]);
      drafts.back().row = static_cast<int>(r);
      drafted.push_back(rows[r]);
    }
    DraftSampleConsumer sample(drafts, &proposals);
    absl::Status status = executor_->Forward(batch, sample);
    if (!status.ok()) return status;
    batch.clear();
    rows.clear();
    for (size_t d = 0; d < drafts.size(); ++d) {
      const int s = drafted[d];
      const v1::DraftSequence& seq = request.sequences(s);
      const DraftProposal& proposal = proposals[d];
      if (!proposal.status.ok()) {
        return absl::InternalError(absl::StrCat("draft: sequence ", seq.sequence_id(),
                                                " has no finite logits at position ",
                                                next_draft[s].position));
      }
      v1::ProposedToken* out = response.mutable_sequences(s)->add_proposals();
      out->set_token(proposal.token);
      out->mutable_q_ids()->Assign(proposal.q.ids.begin(), proposal.q.ids.end());
      out->mutable_q_probs()->Assign(proposal.q.probs.begin(), proposal.q.probs.end());
      if (seq.num_top() > 0) {
        v1::TopTokens* top = response.mutable_sequences(s)->add_top();
        top->mutable_ids()->Assign(proposal.top.ids.begin(), proposal.top.ids.end());
        top->mutable_probs()->Assign(proposal.top.probs.begin(), proposal.top.probs.end());
      }
      // Feed this proposal when the sequence needs another one.
      if (static_cast<uint32_t>(i + 1) < seq.num_draft_tokens()) {
        SequenceInput in;
        in.seq_id = seq.sequence_id();
        in.start_position = static_cast<int>(next_draft[s].position);
        in.tokens = {proposal.token};
        in.logit_indices = {0};
        batch.push_back(std::move(in));
        rows.push_back(s);
      }
      ++next_draft[s].position;
    }
    if (batch.empty()) break;
  }
  for (int s = 0; s < n; ++s) {
    const v1::DraftSequence& seq = request.sequences(s);
    absl::StatusOr<int> cached = executor_->CachedLength(seq.sequence_id());
    response.mutable_sequences(s)->set_cached_length(cached.ok() ? *cached : 0);
  }
  response.set_compute_ms(static_cast<float>(executor_->times().forward_ms - forward_ms_before));
  return response;
}

}  // namespace worker
}  // namespace tandem
