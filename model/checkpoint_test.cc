#include "model/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "model/safetensors_writer.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr char kSharded[] = "tests/reference/checkpoints/tiny_f32_sharded";

std::string MakeDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string U8File(const std::vector<std::pair<std::string, std::string>>& tensors) {
  std::vector<SafetensorsTensorData> data;
  for (const auto& [name, bytes] : tensors) {
    data.push_back({name, SafetensorsDType::kU8, {static_cast<int64_t>(bytes.size())}, bytes});
  }
  return SerializeSafetensors(data);
}

TEST(CheckpointTest, OpensShardedReferenceCheckpoint) {
  auto checkpoint = Checkpoint::Open(kSharded);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  // 3 layers x 9 tensors + embeddings, final norm and lm_head.
  EXPECT_EQ(checkpoint->TensorNames().size(), 30u);
  EXPECT_TRUE(checkpoint->Contains("model.layers.2.mlp.down_proj.weight"));
  // Each tensor resolves to the shard the index names, with that shard's bytes.
  const std::pair<const char*, const char*> expected[] = {
      {"model.embed_tokens.weight", "model-00001-of-00003.safetensors"},
      {"lm_head.weight", "model-00003-of-00003.safetensors"},
  };
  for (const auto& [tensor, shard] : expected) {
    EXPECT_EQ(checkpoint->FileOf(tensor), std::string(kSharded) + "/" + shard);
    auto view = checkpoint->Find(tensor);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->shape, std::vector<int64_t>({300, 32}));
    EXPECT_EQ(view->dtype, SafetensorsDType::kF32);
    auto file = SafetensorsFile::Open(std::string(kSharded) + "/" + shard);
    ASSERT_TRUE(file.ok());
    auto direct = (*file)->Find(tensor);
    ASSERT_TRUE(direct.ok());
    ASSERT_EQ(direct->size_bytes, view->size_bytes);
    EXPECT_EQ(std::memcmp(direct->data, view->data, view->size_bytes), 0);
  }
  auto missing = checkpoint->Find("model.layers.3.mlp.up_proj.weight");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(kSharded));
  EXPECT_THAT(missing.status().message(), HasSubstr("\"model.layers.3.mlp.up_proj.weight\""));
}

TEST(CheckpointTest, SingleFileWinsOverIndex) {
  const std::string dir = MakeDir("single_and_index");
  ASSERT_TRUE(WriteBinaryFile(dir + "/model.safetensors", U8File({{"a", "xy"}})).ok());
  ASSERT_TRUE(WriteBinaryFile(dir + "/model.safetensors.index.json",
                              R"({"weight_map": {"b": "missing.safetensors"}})")
                  .ok());
  auto checkpoint = Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->TensorNames(), std::vector<std::string>({"a"}));
  auto view = checkpoint->Find("a");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(std::string(static_cast<const char*>(view->data), 2), "xy");
}

TEST(CheckpointTest, IndexErrors) {
  const std::string dir = MakeDir("index_errors");
  ASSERT_TRUE(WriteBinaryFile(dir + "/s1.safetensors", U8File({{"a", "1"}, {"b", "2"}})).ok());
  const std::string index = dir + "/model.safetensors.index.json";

  ASSERT_TRUE(WriteBinaryFile(index, R"({"weight_map": {"a": "s1.safetensors",
                                                        "c": "s2.safetensors"}})")
                  .ok());
  auto checkpoint = Checkpoint::Open(dir);
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr(index));
  EXPECT_THAT(checkpoint.status().message(),
              HasSubstr("shard \"s2.safetensors\" (for tensor \"c\") does not exist"));

  ASSERT_TRUE(WriteBinaryFile(index, R"({"weight_map": {"z": "s1.safetensors"}})").ok());
  checkpoint = Checkpoint::Open(dir);
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(checkpoint.status().message(),
              HasSubstr("tensor \"z\" is assigned to shard \"s1.safetensors\", which lacks it"));

  ASSERT_TRUE(WriteBinaryFile(index, R"({"weight_map": {"a": "../s1.safetensors"}})").ok());
  checkpoint = Checkpoint::Open(dir);
  EXPECT_THAT(checkpoint.status().message(),
              HasSubstr("must name a shard file inside the model directory"));

  ASSERT_TRUE(WriteBinaryFile(index, R"({"weight_map": )").ok());
  checkpoint = Checkpoint::Open(dir);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("not valid JSON"));

  ASSERT_TRUE(WriteBinaryFile(index, R"({"metadata": {}})").ok());
  checkpoint = Checkpoint::Open(dir);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("\"weight_map\""));

  // A corrupt shard is reported with the shard's path.
  ASSERT_TRUE(WriteBinaryFile(dir + "/bad.safetensors", "garbage!garbage").ok());
  ASSERT_TRUE(WriteBinaryFile(index, R"({"weight_map": {"a": "bad.safetensors"}})").ok());
  checkpoint = Checkpoint::Open(dir);
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr(dir + "/bad.safetensors"));

  // Two tensors in one shard: the shard is mapped once and serves both.
  ASSERT_TRUE(WriteBinaryFile(index, R"({"weight_map": {"a": "s1.safetensors",
                                                        "b": "s1.safetensors"}})")
                  .ok());
  checkpoint = Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto a = checkpoint->Find("a"), b = checkpoint->Find("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->owner.get(), b->owner.get());
  EXPECT_EQ(*static_cast<const char*>(b->data), '2');
}

TEST(CheckpointTest, EmptyDirectory) {
  const std::string dir = MakeDir("empty_model");
  auto checkpoint = Checkpoint::Open(dir);
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(checkpoint.status().message(),
              HasSubstr("neither model.safetensors nor model.safetensors.index.json"));
  EXPECT_THAT(checkpoint.status().message(), HasSubstr(dir));
}

}  // namespace
}  // namespace tandem
