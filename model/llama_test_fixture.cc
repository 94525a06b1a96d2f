#include "model/llama_test_fixture.h"

#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "model/output_consumers.h"

namespace tandem {

std::vector<int32_t> Range(int begin, int end) {
  std::vector<int32_t> v;
  for (int i = begin; i < end; ++i) v.push_back(i);
  return v;
}

std::vector<int32_t> Slice(const std::vector<int32_t>& v, int begin, int end) {
  return std::vector<int32_t>(v.begin() + begin, v.begin() + end);
}

void ExpectBitwiseEqual(const std::vector<float>& a, const std::vector<float>& b,
                        const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
      << what << ": logits differ in bits";
}

void LlamaTest::SetUp() {
  config_ = SmallTestConfig();
  weights_ = RandomLlamaWeights(config_, 7);
  backend_ = MakeCpuBackend(2);
  model_ = MakeModel(DefaultOptions());
}

LlamaModelOptions LlamaTest::DefaultOptions() {
  LlamaModelOptions options;
  options.block_size = 4;
  options.max_batch_tokens = 128;
  options.kv_cache_bytes = size_t(4) << 20;
  return options;
}

std::unique_ptr<LlamaModel> LlamaTest::MakeModel(const LlamaModelOptions& options) {
  auto model = LlamaModel::Create(weights_, backend_.get(), nullptr, options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

std::vector<float> LlamaTest::Run(LlamaModel* model, const std::vector<SequenceInput>& batch) {
  std::vector<float> logits;
  absl::Status status = ForwardToHost(*model, batch, &logits);
  EXPECT_TRUE(status.ok()) << status;
  return logits;
}

std::vector<float> LlamaTest::Row(const std::vector<float>& logits, int row) const {
  const int v = config_.vocab_size;
  EXPECT_LE(size_t(row + 1) * v, logits.size());
  return std::vector<float>(logits.begin() + size_t(row) * v, logits.begin() + size_t(row + 1) * v);
}

int LlamaTest::CachedLength(uint64_t id) {
  auto length = model_->CachedLength(id);
  EXPECT_TRUE(length.ok()) << length.status();
  return length.ok() ? *length : -1;
}

}  // namespace tandem
