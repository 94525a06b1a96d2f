#include "worker/target_engine.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "model/output_consumers.h"
#include "worker/verify_acceptance.h"

namespace tandem {
namespace worker {

TargetEngine::TargetEngine(ModelExecutor* executor, const TargetProposers* proposers)
    : executor_(executor), proposers_(proposers != nullptr ? proposers : &none_) {}

absl::StatusOr<v1::VerifyResponse> TargetEngine::Verify(const v1::VerifyRequest& request) {
  const ExecutorTimes before = executor_->times();
  const std::vector<SequenceInput> batch = VerifyBatch(request);
  NextCandidatesStep next(request, *proposers_);
  absl::Status status = next.Check();
  if (!status.ok()) return status;
  VerdictConsumer* proposers = next.requested() ? &next : nullptr;
  Verdicts verdicts;
  status = VerifyOnBackend(executor_, request, batch, &verdicts, proposers);
  if (!status.ok()) return status;

  v1::VerifyResponse response;
  for (size_t s = 0; s < verdicts.size() && status.ok(); ++s) {
    const v1::VerifySequence& seq = request.sequences(s);
    if (!verdicts[s].ok()) {
      status = absl::Status(verdicts[s].status().code(),
                            absl::StrCat("verify: sequence ", seq.sequence_id(), ": ",
                                         verdicts[s].status().message()));
      break;
    }
    const Verdict& verdict = *verdicts[s];
    // The cache keeps the committed tokens and the accepted proposals.
    const int start = static_cast<int>(seq.start_position()), n = seq.tokens_size();
    const int num_accepted = static_cast<int>(verdict.accepted.size());
    if (seq.proposal_parents_size() > 0) {
      std::vector<int32_t> keep;
      for (int i = 0; i < n; ++i) keep.push_back(i);
      for (int j : verdict.accepted) keep.push_back(n + j);
      status = executor_->KeepPath(seq.sequence_id(), start, keep);
    } else {
      status = executor_->Truncate(seq.sequence_id(), start + n + num_accepted);
    }
    if (!status.ok()) break;
    v1::VerifiedSequence* out = response.add_sequences();
    out->set_sequence_id(seq.sequence_id());
    out->mutable_committed()->Assign(verdict.committed.begin(), verdict.committed.end());
    out->set_num_accepted(num_accepted);
    out->set_cached_length(start + n + num_accepted);
    out->mutable_logprobs()->Assign(verdict.logprobs.begin(), verdict.logprobs.end());
    if (const v1::NextCandidates* candidates = next.result(static_cast<int>(s))) {
      *out->mutable_next_candidates() = *candidates;
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
  response.set_compute_ms(static_cast<float>(after.forward_ms - before.forward_ms - collective));
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
  NoOpConsumer none;  // No logit rows are requested.
  absl::Status status = executor->Forward(batch, none);
  if (!status.ok()) return status;
  v1::PrefillResponse response;
  for (const SequenceInput& in : batch) {
    response.add_cached_lengths(static_cast<uint32_t>(in.start_position + in.tokens.size()));
  }
  return response;
}

}  // namespace worker
}  // namespace tandem
