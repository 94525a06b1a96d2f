// Wire format of the commands the leader of a tensor-parallel target group broadcasts
// to its followers, so that every rank makes the same LlamaModel calls in the same
// order.
//
// A message is one op (step, heartbeat or shutdown), the group generation it belongs
// to, and a list of model commands (forward, truncate, release, keep-path) executed in
// order. It is sent as a fixed-size first chunk of kGroupChunkBytes (header plus as
// much payload as fits), then, only when the payload does not fit, a second broadcast
// with the rest. Little-endian fixed-width integers; every rank runs the same build on
// the same architecture.
#ifndef TANDEM_WORKER_GROUP_PROTOCOL_H_
#define TANDEM_WORKER_GROUP_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/llama.h"

namespace tandem {
namespace worker {

// Size of the first broadcast of every message, bytes.
inline constexpr size_t kGroupChunkBytes = 16 << 10;
// Header bytes at the start of the first chunk.
inline constexpr size_t kGroupHeaderBytes = 24;
// Largest payload a message may carry (bounds what a follower allocates).
inline constexpr size_t kMaxGroupPayloadBytes = size_t{256} << 20;

enum class GroupOp : uint32_t {
  kStep = 1,       // Execute the commands.
  kHeartbeat = 2,  // Execute the commands (usually deferred ones), then all ranks Barrier.
  kShutdown = 3,   // Execute the commands, then exit.
};

// One LlamaModel call.
struct GroupCommand {
  enum class Kind : uint8_t { kForward = 1, kTruncate = 2, kRelease = 3, kKeepPath = 4 };
  Kind kind = Kind::kForward;
  std::vector<SequenceInput> batch;  // kForward.
  uint64_t seq_id = 0;               // kTruncate, kRelease, kKeepPath.
  int32_t length = 0;                // kTruncate: new length; kKeepPath: start_position.
  std::vector<int32_t> rows;         // kKeepPath: accepted rows.

  static GroupCommand Forward(std::vector<SequenceInput> batch);
  static GroupCommand Truncate(uint64_t seq_id, int length);
  static GroupCommand Release(uint64_t seq_id);
  static GroupCommand KeepPath(uint64_t seq_id, int start_position, std::vector<int32_t> rows);
};

struct GroupMessage {
  GroupOp op = GroupOp::kStep;
  uint64_t generation = 0;
  std::vector<GroupCommand> commands;
};

// Serialises `message`: header then payload. The result is at least kGroupHeaderBytes
// long; the sender pads the first chunk to kGroupChunkBytes.
std::string EncodeGroupMessage(const GroupMessage& message);

// Reads the header of a first chunk (at least kGroupHeaderBytes): the total encoded
// size (header + payload). DATA_LOSS for a bad magic number, op or length.
absl::StatusOr<size_t> DecodeGroupMessageSize(const char* chunk, size_t chunk_bytes);

// Parses a whole encoded message (`bytes` = header + payload, as sized by
// DecodeGroupMessageSize). DATA_LOSS naming the field for malformed input; never
// reads out of bounds.
absl::StatusOr<GroupMessage> DecodeGroupMessage(const char* bytes, size_t size);

const char* GroupOpName(GroupOp op);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_GROUP_PROTOCOL_H_
