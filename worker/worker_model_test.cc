#include "worker/worker_model.h"

#include "gtest/gtest.h"

namespace tandem {
namespace worker {
namespace {

TEST(WorkerModelTest, NameIsTheDirectoryBaseNameOrTheSyntheticSpec) {
  WorkerOptions options;
  options.model_dir = "models/target/";
  EXPECT_EQ(WorkerModelName(options), "target");
  options.model_dir = "draft";
  EXPECT_EQ(WorkerModelName(options), "draft");
  options.model_dir = "/";
  EXPECT_EQ(WorkerModelName(options), "");
  options.synthetic = "tiny";
  EXPECT_EQ(WorkerModelName(options), "synthetic:tiny (NOT A MODEL)");
}

TEST(WorkerModelTest, ModelOptionsComeFromTheWorkerOptions) {
  WorkerOptions options;
  options.kv_cache_mb = 3;
  options.kv_dtype = "f16";
  options.block_size = 8;
  options.max_batch_tokens = 77;
  options.step_timeout = absl::Seconds(4);
  const LlamaModelOptions model = WorkerModelOptions(options);
  EXPECT_EQ(model.kv_cache_bytes, size_t(3) << 20);
  EXPECT_EQ(model.kv_dtype, DType::kF16);
  EXPECT_EQ(model.block_size, 8);
  EXPECT_EQ(model.max_batch_tokens, 77);
  EXPECT_EQ(model.collective_timeout, absl::Seconds(4));
}

TEST(WorkerModelTest, LoadErrorsNameTheFlagAndKeepTheCode) {
  WorkerOptions options;
  options.model_dir = "/nonexistent/tandem-model";
  absl::StatusOr<LlamaWeights> weights = LoadWorkerWeights(options);
  ASSERT_FALSE(weights.ok());
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kNotFound) << weights.status();
  EXPECT_EQ(weights.status().message().find("--model_dir=/nonexistent/tandem-model: "), 0u)
      << weights.status();
}

TEST(WorkerModelTest, SyntheticWeightsHaveTheSpecShape) {
  WorkerOptions options;
  options.synthetic = "tiny";
  absl::StatusOr<LlamaWeights> weights = LoadWorkerWeights(options);
  ASSERT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<SyntheticModel> model = ResolveSyntheticModel(options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(weights->config.hidden_size, model->config.hidden_size);
  EXPECT_EQ(static_cast<int>(weights->layers.size()), model->config.num_layers);
}

}  // namespace
}  // namespace worker
}  // namespace tandem
