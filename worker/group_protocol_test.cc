#include "worker/group_protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace tandem {
namespace worker {
namespace {

GroupMessage Sample() {
  GroupMessage m;
  m.op = GroupOp::kStep;
  m.generation = 0x123456789abcULL;
  m.commands.push_back(GroupCommand::Truncate(7, 12));
  m.commands.push_back(GroupCommand::KeepPath(8, 30, {0, 1, 3}));
  m.commands.push_back(GroupCommand::Release(9));
  SequenceInput a;
  a.seq_id = ~uint64_t{0};
  a.start_position = 5;
  a.tokens = {1, 2, 3, 4};
  a.logit_indices = {3};
  SequenceInput b;
  b.seq_id = 2;
  b.tokens = {9, 8, 7};
  b.logit_indices = {0, 1, 2};
  b.parents = {-1, 0, 0};
  m.commands.push_back(GroupCommand::Forward({a, b}));
  return m;
}

void ExpectEqual(const GroupMessage& a, const GroupMessage& b) {
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.generation, b.generation);
  ASSERT_EQ(a.commands.size(), b.commands.size());
  for (size_t i = 0; i < a.commands.size(); ++i) {
    const GroupCommand& x = a.commands[i];
    const GroupCommand& y = b.commands[i];
    EXPECT_EQ(x.kind, y.kind) << i;
    EXPECT_EQ(x.seq_id, y.seq_id) << i;
    EXPECT_EQ(x.length, y.length) << i;
    EXPECT_EQ(x.rows, y.rows) << i;
    ASSERT_EQ(x.batch.size(), y.batch.size()) << i;
    for (size_t s = 0; s < x.batch.size(); ++s) {
      EXPECT_EQ(x.batch[s].seq_id, y.batch[s].seq_id);
      EXPECT_EQ(x.batch[s].start_position, y.batch[s].start_position);
      EXPECT_EQ(x.batch[s].tokens, y.batch[s].tokens);
      EXPECT_EQ(x.batch[s].logit_indices, y.batch[s].logit_indices);
      EXPECT_EQ(x.batch[s].parents, y.batch[s].parents);
    }
  }
}

TEST(GroupProtocolTest, RoundTrips) {
  const GroupMessage m = Sample();
  const std::string bytes = EncodeGroupMessage(m);
  auto size = DecodeGroupMessageSize(bytes.data(), bytes.size());
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, bytes.size());
  auto decoded = DecodeGroupMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectEqual(m, *decoded);
}

TEST(GroupProtocolTest, EmptyHeartbeatFitsTheHeader) {
  GroupMessage m;
  m.op = GroupOp::kHeartbeat;
  m.generation = 3;
  const std::string bytes = EncodeGroupMessage(m);
  EXPECT_EQ(bytes.size(), kGroupHeaderBytes + 4);
  auto decoded = DecodeGroupMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->op, GroupOp::kHeartbeat);
  EXPECT_TRUE(decoded->commands.empty());
}

TEST(GroupProtocolTest, LargePayloadsRoundTrip) {
  GroupMessage m;
  SequenceInput big;
  big.seq_id = 1;
  big.tokens.assign(20000, 5);  // 80 KB: more than one chunk.
  m.commands.push_back(GroupCommand::Forward({big}));
  const std::string bytes = EncodeGroupMessage(m);
  EXPECT_GT(bytes.size(), kGroupChunkBytes);
  auto size = DecodeGroupMessageSize(bytes.data(), kGroupChunkBytes);
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, bytes.size());
  auto decoded = DecodeGroupMessage(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok());
  ExpectEqual(m, *decoded);
}

TEST(GroupProtocolTest, EveryTruncationIsRejectedWithoutReadingPastTheEnd) {
  const std::string bytes = EncodeGroupMessage(Sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = DecodeGroupMessage(bytes.data(), n);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << n;
  }
  // A consistent header over a cut payload.
  for (size_t n = kGroupHeaderBytes; n < bytes.size(); ++n) {
    std::string cut = bytes.substr(0, n);
    const uint64_t payload = n - kGroupHeaderBytes;
    std::memcpy(&cut[16], &payload, 8);
    EXPECT_EQ(DecodeGroupMessage(cut.data(), cut.size()).status().code(),
              absl::StatusCode::kDataLoss)
        << n;
  }
}

TEST(GroupProtocolTest, CorruptHeadersAndKindsAreRejected) {
  std::string bytes = EncodeGroupMessage(Sample());
  std::string bad_magic = bytes;
  bad_magic[0] ^= 1;
  EXPECT_FALSE(DecodeGroupMessageSize(bad_magic.data(), bad_magic.size()).ok());
  std::string bad_op = bytes;
  bad_op[4] = 9;
  EXPECT_FALSE(DecodeGroupMessageSize(bad_op.data(), bad_op.size()).ok());
  std::string huge = bytes;
  const uint64_t too_big = kMaxGroupPayloadBytes + 1;
  std::memcpy(&huge[16], &too_big, 8);
  EXPECT_FALSE(DecodeGroupMessageSize(huge.data(), huge.size()).ok());
  std::string bad_kind = bytes;
  bad_kind[kGroupHeaderBytes + 4] = 42;  // First command's kind.
  EXPECT_EQ(DecodeGroupMessage(bad_kind.data(), bad_kind.size()).status().code(),
            absl::StatusCode::kDataLoss);
  std::string huge_count = bytes;
  const uint32_t count = 0xffffffffu;
  std::memcpy(&huge_count[kGroupHeaderBytes], &count, 4);
  EXPECT_FALSE(DecodeGroupMessage(huge_count.data(), huge_count.size()).ok());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
