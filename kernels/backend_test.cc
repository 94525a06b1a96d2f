#include "kernels/backend.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/accept/accept_test_util.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/verify_accept.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/test_util.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"

namespace tandem {
namespace {

using cpu::testing::RandomVector;

TEST(DTypeSizeTest, Sizes) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kQ8_0), 1u);
  EXPECT_STREQ(DTypeName(DType::kQ8_0), "q8_0");
  EXPECT_STREQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_EQ(Q8BlocksPerRow(0), 0);
  EXPECT_EQ(Q8BlocksPerRow(32), 1);
  EXPECT_EQ(Q8BlocksPerRow(33), 2);
  EXPECT_EQ(Q8BlocksPerRow(688), 22);
  EXPECT_STREQ(DTypeName(DType::kQ4_0), "q4_0");
  EXPECT_EQ(StoredRowBytes(DType::kF32, 5), 20);
  EXPECT_EQ(StoredRowBytes(DType::kBF16, 5), 10);
  EXPECT_EQ(StoredRowBytes(DType::kQ8_0, 5), 5);
  EXPECT_EQ(StoredRowBytes(DType::kQ4_0, 688), 344);
  EXPECT_EQ(StoredRowBytes(DType::kQ4_0, 33), 17);
  EXPECT_TRUE(IsBlockQuantized(DType::kQ4_0) && IsBlockQuantized(DType::kQ8_0));
  EXPECT_FALSE(IsBlockQuantized(DType::kBF16));
}

// Two sequences: a 3-row chain after 5 cached keys (blocks 2, 0) and a 2-row tree.
StepPlan ValidPlan() {
  StepPlan plan;
  plan.block_size = 4;
  StepPlan::Sequence chain;
  chain.row_count = 3;
  chain.context_length = 5;
  chain.block_table = {2, 0};
  StepPlan::Sequence tree;
  tree.row_begin = 3;
  tree.row_count = 2;
  tree.block_table = {1};
  tree.parents = {-1, -1};
  plan.sequences = {chain, tree};
  plan.tokens = {1, 2, 3, 4, 5};
  plan.positions = {5, 6, 7, 0, 0};
  plan.kv_slots = {1, 2, 3, 4, 5};  // Logical 5,6,7 live in block 0; tree in block 1.
  plan.logit_rows = {2, 3, 4};
  return plan;
}

void ExpectInvalid(const StepPlan& plan, const std::string& fragment) {
  const absl::Status status = ValidateStepPlan(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << fragment;
  EXPECT_NE(status.message().find(fragment), absl::string_view::npos) << status;
}

TEST(ValidateStepPlanTest, AcceptsConsistentPlans) {
  EXPECT_TRUE(ValidateStepPlan(ValidPlan()).ok()) << ValidateStepPlan(ValidPlan());
  EXPECT_TRUE(ValidateStepPlan(StepPlan()).ok());
}

TEST(ValidateStepPlanTest, RejectsEachInconsistency) {
  StepPlan p = ValidPlan();
  p.block_size = 0;
  ExpectInvalid(p, "block_size");
  p = ValidPlan();
  p.positions.pop_back();
  ExpectInvalid(p, "positions");
  p = ValidPlan();
  p.kv_slots.push_back(0);
  ExpectInvalid(p, "kv_slots has");
  p = ValidPlan();
  p.tokens[1] = -3;
  ExpectInvalid(p, "tokens[1]");
  p = ValidPlan();
  p.sequences[1].row_begin = 4;
  ExpectInvalid(p, "row_begin");
  p = ValidPlan();
  p.sequences[1].row_count = 1;
  p.sequences[1].parents = {-1};
  ExpectInvalid(p, "cover 4 of 5 rows");
  p = ValidPlan();
  p.sequences[1].row_count = 7;
  ExpectInvalid(p, "row_count");
  p = ValidPlan();
  p.sequences[0].context_length = -1;
  ExpectInvalid(p, "context_length");
  p = ValidPlan();
  p.sequences[0].block_table = {2};
  ExpectInvalid(p, "cannot hold 8 keys");
  p = ValidPlan();
  p.sequences[1].block_table = {-1};
  ExpectInvalid(p, "negative");
  p = ValidPlan();
  p.sequences[1].parents = {-1};
  ExpectInvalid(p, "parents has 1 entries");
  p = ValidPlan();
  p.sequences[1].parents = {-1, 1};
  ExpectInvalid(p, "parents[1] = 1");
  p = ValidPlan();
  p.sequences[1].parents = {-2, 0};
  ExpectInvalid(p, "parents[0] = -2");
  p = ValidPlan();
  p.kv_slots[1] = 9;
  ExpectInvalid(p, "kv_slots[1] = 9");
  p = ValidPlan();
  p.logit_rows = {3, 2};
  ExpectInvalid(p, "ascending");
  p = ValidPlan();
  p.logit_rows = {5};
  ExpectInvalid(p, "logit_rows[0] = 5");
}

// Backend's default VerifyAccept / SampleDrafts (copy the logits to the host, run the
// reference), exercised through the CPU backend, which keeps them.
class BackendDefaultsTest : public ::testing::Test {
 protected:
  // Row-major `row_major` [rows, vocab] in backend memory as the LogitsView layout of
  // two vocabulary slices (empty on failure, which is reported).
  Buffer UploadTwoSlices(const std::vector<float>& row_major, int rows, int vocab) {
    const std::vector<float> sliced = accept::testing::Sliced(row_major, rows, vocab, 2);
    absl::StatusOr<Buffer> device = backend_.Allocate(sliced.size() * sizeof(float));
    EXPECT_TRUE(device.ok()) << device.status();
    if (!device.ok()) return Buffer();
    EXPECT_TRUE(backend_.CopyToDevice(sliced.data(), device->data(), device->bytes()).ok());
    return *std::move(device);
  }

  CpuBackend backend_{1};
};

// VerifyAccept (Backend's default, which the CPU backend keeps) on logits in backend
// memory stored as two vocabulary slices equals HostVerifyAccept on the row-major copy.
TEST_F(BackendDefaultsTest, VerifyAcceptOnTwoSlicesEqualsHostReference) {
  const int rows = 7, vocab = 32;
  const std::vector<float> row_major = RandomVector(size_t(rows) * vocab, 5, -4.0f, 4.0f);
  const auto row = [&](int r) { return absl::MakeConstSpan(row_major).subspan(r * vocab, vocab); };
  const Buffer device = UploadTwoSlices(row_major, rows, vocab);
  ASSERT_FALSE(device.empty());

  // A greedy chain proposing the argmax of rows 0 and 1 (both accepted, bonus from row
  // 2) and a sampled chain of 3 proposals from the top-4 of rows 3..5, with logprobs.
  std::vector<VerifyChain> chains(2);
  chains[0].params.rule = spec::AcceptanceRule::kGreedy;
  for (int r : {0, 1}) {
    const int32_t token = spec::Argmax(row(r));
    chains[0].proposals.push_back({token, spec::PointMass(token)});
  }
  chains[1].first_row = 3;
  chains[1].sampling.temperature = 1.0f;
  chains[1].key = {9, 4};
  chains[1].want_logprobs = true;
  std::vector<float> probs;
  for (int r = 3; r < 6; ++r) {
    spec::ProcessLogits(row(r), chains[1].sampling, &probs);
    spec::Proposal p;
    p.q = spec::TopKSparse(probs, 4);
    p.token = p.q.ids[r % 4];
    chains[1].proposals.push_back(std::move(p));
  }
  std::vector<VerifyOutcome> got, want;
  ASSERT_TRUE(backend_.VerifyAccept(LogitsView{device.f32(), rows, vocab, 2}, chains, &got).ok());
  ASSERT_TRUE(HostVerifyAccept(row_major, vocab, chains, &want).ok());
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(want[0].num_accepted, 2);
  EXPECT_EQ(want[1].logprobs.size(), want[1].committed.size());
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_TRUE(got[c].status.ok()) << got[c].status;
    EXPECT_EQ(got[c].committed, want[c].committed);
    EXPECT_EQ(got[c].num_accepted, want[c].num_accepted);
    EXPECT_EQ(got[c].logprobs, want[c].logprobs);
  }

  // Call errors: a chain past the rows, a malformed view.
  chains[1].first_row = 4;
  EXPECT_EQ(backend_.VerifyAccept(LogitsView{device.f32(), rows, vocab, 2}, chains, &got).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.VerifyAccept(LogitsView{device.f32(), rows, vocab, 3}, {}, &got).code(),
            absl::StatusCode::kInvalidArgument);
}

// SampleDrafts (Backend's default, which the CPU backend keeps) on logits in backend
// memory stored as two vocabulary slices equals HostSampleDrafts on the row-major copy,
// with the per-row error of an all-NaN row.
TEST_F(BackendDefaultsTest, SampleDraftsOnTwoSlicesEqualsHostReference) {
  const int rows = 6, vocab = 32;
  std::vector<float> row_major = RandomVector(size_t(rows) * vocab, 6, -4.0f, 4.0f);
  std::fill_n(row_major.begin() + 5 * vocab, vocab, std::numeric_limits<float>::quiet_NaN());
  const Buffer device = UploadTwoSlices(row_major, rows, vocab);
  ASSERT_FALSE(device.empty());
  const LogitsView view{device.f32(), rows, vocab, 2};

  // Greedy from row 0; sampled from rows 1..4 with q_size 1, 8, 32 and 40 (> vocab),
  // top-k on row 2 and top-p on row 3; row 3 again at another position; all-NaN row 5.
  std::vector<DraftRow> drafts(7);
  const int q_sizes[] = {32, 1, 8, 32, 40};
  for (int r = 0; r < 5; ++r) {
    drafts[r].row = r;
    drafts[r].sampling.temperature = r == 0 ? 0.0f : 0.9f;
    drafts[r].q_size = q_sizes[r];
    drafts[r].seed = 17;
    drafts[r].position = 40 + r;
  }
  drafts[2].sampling.top_k = 5;
  drafts[3].sampling.top_p = 0.8f;
  drafts[5] = drafts[3];
  drafts[5].position = 3;
  drafts[6] = drafts[1];
  drafts[6].row = 5;
  std::vector<DraftProposal> got, want;
  ASSERT_TRUE(backend_.SampleDrafts(view, drafts, &got).ok());
  ASSERT_TRUE(HostSampleDrafts(row_major, vocab, drafts, &want).ok());
  ASSERT_EQ(got.size(), drafts.size());
  ASSERT_EQ(want.size(), drafts.size());
  EXPECT_EQ(want[0].token, spec::Argmax(absl::MakeConstSpan(row_major).subspan(0, vocab)));
  EXPECT_EQ(want[1].q.ids.size(), 1u);
  EXPECT_EQ(want[4].q.ids.size(), 32u);
  EXPECT_EQ(want[6].status.code(), absl::StatusCode::kInvalidArgument);
  for (size_t i = 0; i < drafts.size(); ++i) {
    SCOPED_TRACE("draft row " + std::to_string(i));
    EXPECT_EQ(got[i].status, want[i].status);
    EXPECT_EQ(got[i].token, want[i].token);
    EXPECT_EQ(got[i].q.ids, want[i].q.ids);
    EXPECT_EQ(got[i].q.probs, want[i].q.probs);
  }

  // Call errors: a row past the view, a q_size of 0, a malformed view.
  drafts[0].row = rows;
  EXPECT_EQ(backend_.SampleDrafts(view, drafts, &got).code(), absl::StatusCode::kInvalidArgument);
  drafts[0].row = 0;
  drafts[1].q_size = 0;
  EXPECT_EQ(backend_.SampleDrafts(view, drafts, &got).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_.SampleDrafts(LogitsView{device.f32(), rows, vocab, 3}, {}, &got).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem
