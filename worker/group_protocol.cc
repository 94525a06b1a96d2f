#include "worker/group_protocol.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace tandem {
namespace worker {
namespace {

constexpr uint32_t kMagic = 0x31474454;  // "TDG1" little-endian.

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out_.append(bytes, sizeof(T));
  }
  void PutInts(const std::vector<int32_t>& values) {
    Put<uint32_t>(static_cast<uint32_t>(values.size()));
    out_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int32_t));
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  absl::Status Get(T* value, const char* field) {
    if (size_ - pos_ < sizeof(T)) return Truncated(field);
    std::memcpy(value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }
  absl::Status GetInts(std::vector<int32_t>* values, const char* field) {
    uint32_t count = 0;
    if (absl::Status s = Get(&count, field); !s.ok()) return s;
    if ((size_ - pos_) / sizeof(int32_t) < count) return Truncated(field);
    values->resize(count);
    // memcpy from/to null is undefined even for 0 bytes (an empty vector's data()).
    if (count > 0) std::memcpy(values->data(), data_ + pos_, size_t{count} * sizeof(int32_t));
    pos_ += size_t{count} * sizeof(int32_t);
    return absl::OkStatus();
  }
  size_t remaining() const { return size_ - pos_; }

 private:
  absl::Status Truncated(const char* field) const {
    return absl::DataLossError(
        absl::StrCat("group message: truncated at ", field, " (byte ", pos_, " of ", size_, ")"));
  }
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

absl::Status DecodeCommand(Reader& in, GroupCommand* command) {
  uint8_t kind = 0;
  TANDEM_RETURN_IF_ERROR(in.Get(&kind, "command kind"));
  switch (static_cast<GroupCommand::Kind>(kind)) {
    case GroupCommand::Kind::kForward: {
      command->kind = GroupCommand::Kind::kForward;
      uint32_t count = 0;
      TANDEM_RETURN_IF_ERROR(in.Get(&count, "batch size"));
      // Each sequence takes at least 24 bytes; refuse counts the bytes cannot hold.
      if (count > in.remaining() / 24) {
        return absl::DataLossError(absl::StrCat("group message: batch of ", count, " sequences in ",
                                                in.remaining(), " bytes"));
      }
      command->batch.resize(count);
      for (SequenceInput& seq : command->batch) {
        TANDEM_RETURN_IF_ERROR(in.Get(&seq.seq_id, "sequence id"));
        int32_t start = 0;
        TANDEM_RETURN_IF_ERROR(in.Get(&start, "start position"));
        seq.start_position = start;
        TANDEM_RETURN_IF_ERROR(in.GetInts(&seq.tokens, "tokens"));
        TANDEM_RETURN_IF_ERROR(in.GetInts(&seq.logit_indices, "logit indices"));
        TANDEM_RETURN_IF_ERROR(in.GetInts(&seq.parents, "parents"));
      }
      return absl::OkStatus();
    }
    case GroupCommand::Kind::kTruncate:
    case GroupCommand::Kind::kRelease:
    case GroupCommand::Kind::kKeepPath:
      command->kind = static_cast<GroupCommand::Kind>(kind);
      TANDEM_RETURN_IF_ERROR(in.Get(&command->seq_id, "sequence id"));
      TANDEM_RETURN_IF_ERROR(in.Get(&command->length, "length"));
      return in.GetInts(&command->rows, "rows");
  }
  return absl::DataLossError(absl::StrCat("group message: unknown command kind ", int{kind}));
}

bool ValidOp(uint32_t op) {
  return op >= static_cast<uint32_t>(GroupOp::kStep) &&
         op <= static_cast<uint32_t>(GroupOp::kShutdown);
}

}  // namespace

GroupCommand GroupCommand::Forward(std::vector<SequenceInput> batch) {
  GroupCommand c;
  c.kind = Kind::kForward;
  c.batch = std::move(batch);
  return c;
}

GroupCommand GroupCommand::Truncate(uint64_t seq_id, int length) {
  GroupCommand c;
  c.kind = Kind::kTruncate;
  c.seq_id = seq_id;
  c.length = length;
  return c;
}

GroupCommand GroupCommand::Release(uint64_t seq_id) {
  GroupCommand c;
  c.kind = Kind::kRelease;
  c.seq_id = seq_id;
  return c;
}

GroupCommand GroupCommand::KeepPath(uint64_t seq_id, int start_position,
                                    std::vector<int32_t> rows) {
  GroupCommand c;
  c.kind = Kind::kKeepPath;
  c.seq_id = seq_id;
  c.length = start_position;
  c.rows = std::move(rows);
  return c;
}

const char* GroupOpName(GroupOp op) {
  switch (op) {
    case GroupOp::kStep:
      return "step";
    case GroupOp::kHeartbeat:
      return "heartbeat";
    case GroupOp::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

std::string EncodeGroupMessage(const GroupMessage& message) {
  Writer w;
  w.Put<uint32_t>(kMagic);
  w.Put<uint32_t>(static_cast<uint32_t>(message.op));
  w.Put<uint64_t>(message.generation);
  w.Put<uint64_t>(0);  // Payload length, patched below.
  w.Put<uint32_t>(static_cast<uint32_t>(message.commands.size()));
  for (const GroupCommand& c : message.commands) {
    w.Put<uint8_t>(static_cast<uint8_t>(c.kind));
    if (c.kind == GroupCommand::Kind::kForward) {
      w.Put<uint32_t>(static_cast<uint32_t>(c.batch.size()));
      for (const SequenceInput& seq : c.batch) {
        w.Put<uint64_t>(seq.seq_id);
        w.Put<int32_t>(seq.start_position);
        w.PutInts(seq.tokens);
        w.PutInts(seq.logit_indices);
        w.PutInts(seq.parents);
      }
    } else {
      w.Put<uint64_t>(c.seq_id);
      w.Put<int32_t>(c.length);
      w.PutInts(c.rows);
    }
  }
  std::string out = std::move(w.out());
  const uint64_t payload = out.size() - kGroupHeaderBytes;
  std::memcpy(&out[16], &payload, sizeof(payload));
  return out;
}

absl::StatusOr<size_t> DecodeGroupMessageSize(const char* chunk, size_t chunk_bytes) {
  if (chunk_bytes < kGroupHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat("group message: chunk of ", chunk_bytes, " bytes is shorter than the header"));
  }
  uint32_t magic = 0, op = 0;
  uint64_t payload = 0;
  std::memcpy(&magic, chunk, 4);
  std::memcpy(&op, chunk + 4, 4);
  std::memcpy(&payload, chunk + 16, 8);
  if (magic != kMagic) {
    return absl::DataLossError(absl::StrCat("group message: bad magic 0x", absl::Hex(magic)));
  }
  if (!ValidOp(op)) return absl::DataLossError(absl::StrCat("group message: bad op ", op));
  if (payload > kMaxGroupPayloadBytes) {
    return absl::DataLossError(
        absl::StrCat("group message: payload of ", payload, " bytes is over the limit"));
  }
  return kGroupHeaderBytes + static_cast<size_t>(payload);
}

absl::StatusOr<GroupMessage> DecodeGroupMessage(const char* bytes, size_t size) {
  absl::StatusOr<size_t> expected = DecodeGroupMessageSize(bytes, size);
  if (!expected.ok()) return expected.status();
  if (*expected != size) {
    return absl::DataLossError(
        absl::StrCat("group message: header says ", *expected, " bytes, got ", size));
  }
  GroupMessage message;
  uint32_t op = 0;
  std::memcpy(&op, bytes + 4, 4);
  message.op = static_cast<GroupOp>(op);
  std::memcpy(&message.generation, bytes + 8, 8);
  Reader in(bytes + kGroupHeaderBytes, size - kGroupHeaderBytes);
  uint32_t count = 0;
  TANDEM_RETURN_IF_ERROR(in.Get(&count, "command count"));
  if (count > in.remaining()) {
    return absl::DataLossError(
        absl::StrCat("group message: ", count, " commands in ", in.remaining(), " bytes"));
  }
  message.commands.resize(count);
  for (GroupCommand& command : message.commands) {
    TANDEM_RETURN_IF_ERROR(DecodeCommand(in, &command));
  }
  if (in.remaining() != 0) {
    return absl::DataLossError(absl::StrCat("group message: ", in.remaining(), " trailing bytes"));
  }
  return message;
}

}  // namespace worker
}  // namespace tandem
