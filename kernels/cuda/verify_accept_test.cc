// CudaBackend::VerifyAccept and SampleDrafts (the kernels) against the same algorithms run on
// the host (accept::EmulatedVerifyAccept: identical reduction order, so tokens must be
// equal and log-probabilities agree to float rounding of exp/log) and against the CPU
// backend (the spec reference), on random batches over every rule, sampling setting and
// awkward logits, in row-major and vocab-sliced (tensor-parallel) layouts, up to a
// 32000-entry vocabulary. Skips without a CUDA device.
#include "kernels/accept/verify_accept.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/accept/accept_test_util.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/emulated_verify_accept.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_test_util.h"

namespace tandem {
namespace {

class CudaVerifyAcceptTest : public cuda::testing::CudaTest {
 protected:
  // Runs `batch` (its logits split in `parts` vocabulary slices) through the device, the
  // host emulation of its algorithm and the CPU backend, and expects the same outcomes
  // bitwise. Returns the number of outcomes the device gave (0 on a failure).
  int CompareWithHost(const accept::testing::RandomBatch& batch, int vocab, int parts,
                      const std::string& where) {
    const std::vector<float> sliced =
        accept::testing::Sliced(batch.logits, batch.rows, vocab, parts);
    const LogitsView host_view{sliced.data(), batch.rows, vocab, parts};
    std::vector<VerifyOutcome> emulated, reference, got;
    EXPECT_TRUE(accept::EmulatedVerifyAccept(host_view, batch.chains, &emulated).ok()) << where;
    EXPECT_TRUE(cpu_.VerifyAccept(host_view, batch.chains, &reference).ok()) << where;
    const Buffer device = ToDevice(sliced);
    const LogitsView device_view{device.f32(), batch.rows, vocab, parts};
    const absl::Status status = backend_->VerifyAccept(device_view, batch.chains, &got);
    EXPECT_TRUE(status.ok()) << where << ": " << status;
    if (!status.ok()) return 0;
    accept::testing::ExpectSameOutcomes(emulated, got, where + " (vs host emulation)");
    accept::testing::ExpectSameOutcomes(reference, got, where + " (vs cpu backend)");
    return static_cast<int>(got.size());
  }

  CpuBackend cpu_{1};
};

TEST_F(CudaVerifyAcceptTest, RandomBatchesMatchTheHostAlgorithmAndTheCpuBackend) {
  std::mt19937_64 rng(99);
  int chains = 0;
  for (int vocab : {8, 1000, 32000}) {
    for (int parts : {1, 4}) {
      for (int batch_index = 0; batch_index < (vocab == 32000 ? 2 : 8); ++batch_index) {
        const accept::testing::RandomBatch batch =
            accept::testing::MakeRandomBatch(rng, vocab, 8, batch_index);
        chains += CompareWithHost(
            batch, vocab, parts,
            absl::StrCat("vocab ", vocab, " parts ", parts, " batch ", batch_index));
      }
    }
  }
  EXPECT_EQ(chains, (8 + 8 + 2) * 2 * 8);
}

// Trees of every shape mixed with chains (accept::AcceptTree in the kernel): the host
// emulation and the CPU backend (spec::AcceptTree) bitwise, paths included.
TEST_F(CudaVerifyAcceptTest, RandomTreesMatchTheHostAlgorithmAndTheCpuBackend) {
  std::mt19937_64 rng(123);
  int items = 0;
  for (int vocab : {64, 1000, 32000}) {
    for (int parts : {1, 4}) {
      for (int batch_index = 0; batch_index < (vocab == 32000 ? 2 : 6); ++batch_index) {
        const accept::testing::RandomBatch batch =
            accept::testing::MakeRandomTreeBatch(rng, vocab, 7, batch_index);
        items += CompareWithHost(
            batch, vocab, parts,
            absl::StrCat("trees vocab ", vocab, " parts ", parts, " batch ", batch_index));
      }
    }
  }
  EXPECT_EQ(items, (6 + 6 + 2) * 2 * 7);
}

TEST_F(CudaVerifyAcceptTest, DraftSamplingMatchesTheHostAlgorithmAndTheCpuBackend) {
  std::mt19937_64 rng(77);
  CpuBackend cpu(1);
  int checked = 0;
  for (int vocab : {8, 1000, 32000}) {
    for (int parts : {1, 4}) {
      const int rows = vocab == 32000 ? 6 : 24;
      std::vector<float> logits;
      std::vector<DraftRow> drafts;
      for (int r = 0; r < rows; ++r) {
        const std::vector<float> row = accept::testing::RandomRow(rng, vocab, r % 7);
        logits.insert(logits.end(), row.begin(), row.end());
        DraftRow draft;
        draft.row = r;
        draft.sampling = accept::testing::RandomSampling(rng, vocab, r % 4 == 0);
        draft.q_size = r % 3 == 0 ? 1 : 32;
        draft.seed = rng();
        draft.position = rng() % 5000;
        drafts.push_back(draft);
      }
      const std::vector<float> sliced = accept::testing::Sliced(logits, rows, vocab, parts);
      const LogitsView host_view{sliced.data(), rows, vocab, parts};
      std::vector<DraftProposal> emulated, reference, got;
      ASSERT_TRUE(accept::EmulatedSampleDrafts(host_view, drafts, &emulated).ok());
      ASSERT_TRUE(cpu.SampleDrafts(host_view, drafts, &reference).ok());
      const Buffer device = ToDevice(sliced);
      const absl::Status status =
          backend_->SampleDrafts(LogitsView{device.f32(), rows, vocab, parts}, drafts, &got);
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(got.size(), drafts.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const std::string where = absl::StrCat("vocab ", vocab, " parts ", parts, " row ", i);
        for (const std::vector<DraftProposal>* want : {&emulated, &reference}) {
          ASSERT_EQ((*want)[i].status, got[i].status) << where;
          ASSERT_EQ((*want)[i].token, got[i].token) << where;
          ASSERT_EQ((*want)[i].q.ids, got[i].q.ids) << where;
          ASSERT_EQ((*want)[i].q.probs.size(), got[i].q.probs.size()) << where;
          for (size_t j = 0; j < got[i].q.probs.size(); ++j) {
            ASSERT_NEAR((*want)[i].q.probs[j], got[i].q.probs[j], 1e-5f * got[i].q.probs[j])
                << where << " q entry " << j;
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, (24 + 24 + 6) * 2);
}

TEST_F(CudaVerifyAcceptTest, BadViewsAndEmptyBatches) {
  const Buffer device = Zeros(4 * 10);
  VerifyChain chain;
  chain.first_row = 3;
  chain.proposals.resize(1);  // Rows 3..4 of 4.
  std::vector<VerifyOutcome> outcomes(3);
  EXPECT_EQ(backend_->VerifyAccept(LogitsView{device.f32(), 4, 10, 1}, {chain}, &outcomes).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->VerifyAccept(LogitsView{device.f32(), 4, 10, 3}, {}, &outcomes).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(backend_->VerifyAccept(LogitsView{device.f32(), 4, 10, 1}, {}, &outcomes).ok());
  EXPECT_TRUE(outcomes.empty());
}

}  // namespace
}  // namespace tandem
