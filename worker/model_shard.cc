#include "worker/model_shard.h"

#include <utility>

#include "model/output_consumers.h"

namespace tandem {
namespace worker {

ModelShard::ModelShard(std::unique_ptr<LlamaModel> model) : model_(std::move(model)) {}

absl::Status ModelShard::Forward(const std::vector<SequenceInput>& batch,
                                 ForwardConsumer& consumer) {
  for (const SequenceInput& in : batch) live_.insert(in.seq_id);
  absl::Status status = model_->Forward(batch, consumer);
  if (!status.ok()) {
    // Sequences the failed call would have created do not exist.
    for (const SequenceInput& in : batch) {
      if (!model_->CachedLength(in.seq_id).ok()) live_.erase(in.seq_id);
    }
  }
  return status;
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

absl::Status ModelShard::Execute(const GroupCommand& command) {
  switch (command.kind) {
    case GroupCommand::Kind::kForward: {
      NoOpConsumer none;
      return Forward(command.batch, none);
    }
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
