// The streaming safetensors writer: a file written tensor by tensor is byte for byte the
// file SerializeSafetensors builds in memory, reads back, and misuse is a clear error.
#include "model/safetensors_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/test_data.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::vector<SafetensorsTensorData> SomeTensors() {
  return {
      {"a",
       SafetensorsDType::kF32,
       {2, 3},
       FloatBytes({1, -2, 3.5f, 0.25f, 1e-3f, -7}, SafetensorsDType::kF32)},
      {"b_scale", SafetensorsDType::kF16, {3}, FloatBytes({1, -0.5f, 2}, SafetensorsDType::kF16)},
      {"empty", SafetensorsDType::kBF16, {0, 4}, ""},
      {"q", SafetensorsDType::kI8, {1, 5}, std::string("\x01\xff\x7f\x81\x00", 5)},
  };
}

std::vector<SafetensorsTensorEntry> EntriesOf(const std::vector<SafetensorsTensorData>& tensors) {
  std::vector<SafetensorsTensorEntry> entries;
  for (const auto& t : tensors) entries.push_back({t.name, t.dtype, t.shape, t.bytes.size()});
  return entries;
}

TEST(SafetensorsWriterTest, StreamedFileEqualsTheInMemoryFileAndReadsBack) {
  const auto tensors = SomeTensors();
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"k", "v"}};
  const std::string path = testing::TempPath("streamed.safetensors");
  auto writer = SafetensorsFileWriter::Create(path, EntriesOf(tensors), metadata);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& t : tensors) ASSERT_TRUE(writer->Append(t.bytes).ok()) << t.name;
  ASSERT_TRUE(writer->Finish().ok());

  const std::string bytes = testing::ReadFile(path);
  EXPECT_EQ(bytes, SerializeSafetensors(tensors, metadata));
  auto header = ParseSafetensorsHeader(bytes, bytes.size(), path);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->data_offset % 8, 0u);
  EXPECT_EQ(header->metadata.at("k"), "v");
  const SafetensorsTensorInfo& q = header->tensors.at("q");
  EXPECT_EQ(q.dtype, SafetensorsDType::kI8);
  EXPECT_EQ(bytes.substr(header->data_offset + q.begin, q.end - q.begin), tensors[3].bytes);
}

TEST(SafetensorsWriterTest, MisuseIsAClearError) {
  const auto tensors = SomeTensors();
  const std::string path = testing::TempPath("misuse.safetensors");
  auto writer = SafetensorsFileWriter::Create(path, EntriesOf(tensors));
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::Status wrong_size = writer->Append("abc");
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.message(), HasSubstr("tensor \"a\" is 24 bytes, got 3"));

  ASSERT_TRUE(writer->Append(tensors[0].bytes).ok());
  absl::Status early = writer->Finish();
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(early.message(), HasSubstr("3 of 4 tensors not written"));

  for (size_t i = 1; i < tensors.size(); ++i) ASSERT_TRUE(writer->Append(tensors[i].bytes).ok());
  absl::Status extra = writer->Append("");
  EXPECT_EQ(extra.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(extra.message(), HasSubstr("already written"));
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(writer->Finish().code(), absl::StatusCode::kFailedPrecondition);

  auto bad_path = SafetensorsFileWriter::Create(testing::TempPath("no/such/dir/x.safetensors"), {});
  EXPECT_EQ(bad_path.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(bad_path.status().message(), HasSubstr("cannot create"));
}

}  // namespace
}  // namespace tandem
