// Testonly fixture shared by the LlamaModel tests on the CPU backend (llama_test.cc,
// llama_cache_test.cc): the small test config with seeded random weights, a 2-thread CPU
// backend, a model with small KV blocks, and helpers to run a batch and compare logits.
#ifndef TANDEM_MODEL_LLAMA_TEST_FIXTURE_H_
#define TANDEM_MODEL_LLAMA_TEST_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "model/llama.h"
#include "model/llama_test_util.h"

namespace tandem {

// The ids begin, begin + 1, ..., end - 1.
std::vector<int32_t> Range(int begin, int end);

// Elements [begin, end) of `v`.
std::vector<int32_t> Slice(const std::vector<int32_t>& v, int begin, int end);

// Fails the test (prefixed with `what`) unless `a` and `b` are equal bit for bit.
void ExpectBitwiseEqual(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what);

class LlamaTest : public ::testing::Test {
 protected:
  // SmallTestConfig() with RandomLlamaWeights(config_, 7), a 2-thread CPU backend and
  // model_ made with DefaultOptions().
  void SetUp() override;

  // Blocks of 4 tokens (sequences span many, non-adjacent blocks), 128 batch tokens,
  // a 4 MiB KV cache.
  static LlamaModelOptions DefaultOptions();

  // A model over weights_ and backend_ (no communicator); null (and a test failure) if
  // Create fails.
  std::unique_ptr<LlamaModel> MakeModel(const LlamaModelOptions& options);

  // Forwards `batch` and returns its logit rows [rows, vocab]; a failed Forward fails
  // the test.
  std::vector<float> Run(LlamaModel* model, const std::vector<SequenceInput>& batch);

  // Row `row` of a [rows, vocab] logits array.
  std::vector<float> Row(const std::vector<float>& logits, int row) const;

  // model_'s cached length of sequence `id`; -1 (and a test failure) if unknown.
  int CachedLength(uint64_t id);

  LlamaConfig config_;
  LlamaWeights weights_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LlamaModel> model_;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_LLAMA_TEST_FIXTURE_H_
