#include "worker/model_shard.h"

#include <utility>

namespace tandem {
namespace worker {

ModelShard::ModelShard(std::unique_ptr<LlamaModel> model) : model_(std::move(model)) {}

template <typename Fn>
absl::Status ModelShard::Tracked(const std::vector<SequenceInput>& batch, Fn&& forward) {
  for (const SequenceInput& in : batch) live_.insert(in.seq_id);
  absl::Status status = forward();
  if (!status.ok()) {
    // Sequences the failed call would have created do not exist.
    for (const SequenceInput& in : batch) {
      if (!model_->CachedLength(in.seq_id).ok()) live_.erase(in.seq_id);
    }
  }
  return status;
}

absl::Status ModelShard::Forward(const std::vector<SequenceInput>& batch,
                                 std::vector<float>* logits) {
  return Tracked(batch, [&] { return model_->Forward(batch, logits); });
}

absl::Status ModelShard::ForwardAccept(const std::vector<SequenceInput>& batch,
                                       absl::Span<const VerifyChain> chains,
                                       std::vector<VerifyOutcome>* outcomes) {
  return Tracked(batch, [&] { return model_->ForwardAccept(batch, chains, outcomes); });
}

absl::Status ModelShard::ForwardSampleDrafts(const std::vector<SequenceInput>& batch,
                                             absl::Span<const DraftRow> drafts,
                                             std::vector<DraftProposal>* proposals) {
  return Tracked(batch, [&] { return model_->ForwardSampleDrafts(batch, drafts, proposals); });
}

absl::Status ModelShard::Truncate(uint64_t seq_id, int length) {
  return model_->Truncate(seq_id, length);
}

absl::Status ModelShard::Release(uint64_t seq_id) {
  live_.erase(seq_id);
  return model_->Release(seq_id);
}

absl::Status ModelShard::KeepPath(uint64_t seq_id, int start_position,
                                  const std::vector<int32_t>& rows) {
  return model_->KeepPath(seq_id, start_position, rows);
}

absl::Status ModelShard::Execute(const GroupCommand& command, std::vector<float>* logits) {
  switch (command.kind) {
    case GroupCommand::Kind::kForward:
      return Forward(command.batch, logits);
    case GroupCommand::Kind::kTruncate:
      return Truncate(command.seq_id, command.length);
    case GroupCommand::Kind::kRelease:
      return Release(command.seq_id);
    case GroupCommand::Kind::kKeepPath:
      return KeepPath(command.seq_id, command.length, command.rows);
  }
  return absl::InvalidArgumentError("unknown group command");
}

int ModelShard::DropAll() {
  int dropped = 0;
  for (uint64_t id : live_) {
    if (model_->Release(id).ok()) ++dropped;
  }
  live_.clear();
  return dropped;
}

}  // namespace worker
}  // namespace tandem
