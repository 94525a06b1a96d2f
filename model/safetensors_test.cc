#include "model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "model/safetensors_writer.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// Parses `bytes` as a whole file named "t.safetensors".
absl::StatusOr<SafetensorsHeader> Parse(const std::string& bytes) {
  return ParseSafetensorsHeader(bytes, bytes.size(), "t.safetensors");
}

void ExpectInvalid(const std::string& bytes, const std::string& expected) {
  auto header = Parse(bytes);
  ASSERT_FALSE(header.ok()) << "accepted a bad file, expected: " << expected;
  EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(header.status().message(), HasSubstr("t.safetensors"));
  EXPECT_THAT(header.status().message(), HasSubstr(expected));
}

// A file with one tensor "w" whose header entry is `entry` and a `data_size`-byte
// buffer.
std::string OneTensor(const std::string& entry, size_t data_size) {
  return AssembleSafetensors("{\"w\": " + entry + "}", std::string(data_size, '\x01'));
}

TEST(SafetensorsTest, WritesAndReadsKnownValues) {
  const std::vector<SafetensorsTensorData> tensors = {
      {"a.f32",
       SafetensorsDType::kF32,
       {2, 3},
       FloatBytes({1, -2, 3.5f, 0.25f, 1e-3f, -7}, SafetensorsDType::kF32)},
      {"b.f16", SafetensorsDType::kF16, {3}, FloatBytes({1, -0.5f, 65504}, SafetensorsDType::kF16)},
      {"c.bf16", SafetensorsDType::kBF16, {1, 2}, FloatBytes({3, -1}, SafetensorsDType::kBF16)},
      {"d.i64", SafetensorsDType::kI64, {}, std::string("\x2A\0\0\0\0\0\0\0", 8)},
      {"e.empty", SafetensorsDType::kF32, {0, 5}, ""},
  };
  const std::string path = TempPath("known.safetensors");
  ASSERT_TRUE(WriteBinaryFile(path, SerializeSafetensors(tensors, {{"format", "pt"}})).ok());

  std::shared_ptr<const void> keep_alive;
  const void* f32_data = nullptr;
  {
    auto file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ((*file)->header().metadata.at("format"), "pt");
    EXPECT_EQ((*file)->header().data_offset % 8, 0u);
    EXPECT_EQ((*file)->TensorNames(),
              std::vector<std::string>({"a.f32", "b.f16", "c.bf16", "d.i64", "e.empty"}));
    auto a = (*file)->Find("a.f32");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dtype, SafetensorsDType::kF32);
    EXPECT_EQ(a->shape, std::vector<int64_t>({2, 3}));
    EXPECT_EQ(a->size_bytes, 24u);
    auto b = (*file)->Find("b.f16");
    ASSERT_TRUE(b.ok());
    uint16_t half[3];
    std::memcpy(half, b->data, sizeof(half));
    EXPECT_EQ(half[0], 0x3C00);
    EXPECT_EQ(half[1], 0xB800);
    EXPECT_EQ(half[2], 0x7BFF);
    auto c = (*file)->Find("c.bf16");
    ASSERT_TRUE(c.ok());
    uint16_t bf16[2];
    std::memcpy(bf16, c->data, sizeof(bf16));
    EXPECT_EQ(bf16[0], 0x4040);
    EXPECT_EQ(bf16[1], 0xBF80);
    auto d = (*file)->Find("d.i64");
    ASSERT_TRUE(d.ok());
    int64_t scalar;
    std::memcpy(&scalar, d->data, 8);
    EXPECT_EQ(scalar, 42);
    EXPECT_TRUE(d->shape.empty());
    auto e = (*file)->Find("e.empty");
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->size_bytes, 0u);
    keep_alive = a->owner;
    f32_data = a->data;
  }
  // The view's owner keeps the mapping valid after the file object is gone.
  float values[6];
  std::memcpy(values, f32_data, sizeof(values));
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[2], 3.5f);
  EXPECT_EQ(values[5], -7.0f);
}

TEST(SafetensorsTest, MissingTensorAndFile) {
  const std::string path = TempPath("one.safetensors");
  ASSERT_TRUE(
      WriteBinaryFile(path, SerializeSafetensors({{"x", SafetensorsDType::kU8, {2}, "ab"}})).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto missing = (*file)->Find("y");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
  EXPECT_THAT(missing.status().message(), HasSubstr("\"y\""));

  auto absent = SafetensorsFile::Open(TempPath("absent.safetensors"));
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(absent.status().message(), HasSubstr("absent.safetensors"));
}

TEST(SafetensorsTest, TruncatedFiles) {
  ExpectInvalid("", "shorter than the 8-byte header length");
  ExpectInvalid("\x10\0\0", "shorter than the 8-byte header length");
  const std::string valid = SerializeSafetensors(
      {{"w", SafetensorsDType::kF32, {4}, FloatBytes({1, 2, 3, 4}, SafetensorsDType::kF32)}});
  ASSERT_TRUE(Parse(valid).ok());
  // Cut inside the data buffer: the tensor now reaches beyond it.
  ExpectInvalid(valid.substr(0, valid.size() - 1),
                "tensor \"w\": data_offsets [0, 16] are beyond the data buffer of 15 bytes");
  // Cut inside the header.
  ExpectInvalid(valid.substr(0, 20), "reaches beyond the end of the 20-byte file");
  // Same through Open on a truncated file on disk.
  const std::string path = TempPath("truncated.safetensors");
  ASSERT_TRUE(WriteBinaryFile(path, valid.substr(0, valid.size() - 3)).ok());
  auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(), HasSubstr(path));
  EXPECT_THAT(file.status().message(), HasSubstr("beyond the data buffer"));
  ASSERT_TRUE(WriteBinaryFile(path, "abc").ok());
  file = SafetensorsFile::Open(path);
  EXPECT_THAT(file.status().message(), HasSubstr("shorter than the 8-byte header"));
}

TEST(SafetensorsTest, HeaderLengthLimits) {
  std::string huge(8, '\0');
  huge[4] = 1;  // 2^32 bytes.
  ExpectInvalid(huge + "{}", "exceeds the limit of 100000000 bytes");
  ExpectInvalid(AssembleSafetensors("{}", "").substr(0, 8) + "{",
                "reaches beyond the end of the 9-byte file");
  // A prefix that does not cover the header while the file is long enough.
  const std::string file = AssembleSafetensors("{}      ", "data");
  auto header = ParseSafetensorsHeader(file.substr(0, 12), file.size(), "t.safetensors");
  ASSERT_FALSE(header.ok());
  EXPECT_THAT(header.status().message(), HasSubstr("only 12 bytes were read"));
  EXPECT_TRUE(ParseSafetensorsHeader(file.substr(0, 16), file.size(), "t").ok());
}

TEST(SafetensorsTest, BadJson) {
  ExpectInvalid(AssembleSafetensors("{\"w\": ", ""), "header is not valid JSON");
  ExpectInvalid(AssembleSafetensors("{} x", ""), "header is not valid JSON");
  ExpectInvalid(AssembleSafetensors("{\"\xff\": 1}", ""), "header is not valid JSON");
  ExpectInvalid(AssembleSafetensors("[1, 2]", ""), "header must be a JSON object");
  ExpectInvalid(OneTensor("3", 0), "tensor \"w\": expected an object, got 3");
}

TEST(SafetensorsTest, BadDtypeAndShape) {
  ExpectInvalid(OneTensor(R"({"shape": [1], "data_offsets": [0, 4]})", 4),
                "tensor \"w\": missing string field \"dtype\"");
  ExpectInvalid(OneTensor(R"({"dtype": "F8", "shape": [1], "data_offsets": [0, 1]})", 1),
                "tensor \"w\": unknown dtype \"F8\"");
  ExpectInvalid(OneTensor(R"({"dtype": "F32", "data_offsets": [0, 4]})", 4),
                "tensor \"w\": missing list field \"shape\"");
  for (const char* shape : {"[-1]", "[2.5]", "[\"3\"]", "[1e3]", "[null]"}) {
    ExpectInvalid(OneTensor(std::string(R"({"dtype": "F32", "shape": )") + shape +
                                R"(, "data_offsets": [0, 4]})",
                            4),
                  "has a dimension that is not a non-negative integer");
  }
  ExpectInvalid(OneTensor(R"({"dtype": "U8", "shape": [4294967296, 4294967296],
                              "data_offsets": [0, 0]})",
                          0),
                "tensor \"w\": shape [4294967296,4294967296] is too large");
  ExpectInvalid(OneTensor(R"({"dtype": "F64", "shape": [2305843009213693952],
                              "data_offsets": [0, 0]})",
                          0),
                "is too large");
}

TEST(SafetensorsTest, BadOffsets) {
  ExpectInvalid(OneTensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [0]})", 4),
                "\"data_offsets\" must be a list of two non-negative integers");
  ExpectInvalid(OneTensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]})", 4),
                "\"data_offsets\" must be a list of two non-negative integers");
  ExpectInvalid(OneTensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [8, 4]})", 8),
                "tensor \"w\": data_offsets [8, 4] end before they begin");
  ExpectInvalid(OneTensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [4, 8]})", 6),
                "tensor \"w\": data_offsets [4, 8] are beyond the data buffer of 6 bytes");
  ExpectInvalid(
      OneTensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]})", 4),
      "are beyond the data buffer");
  // Shape/dtype mismatch with the byte range.
  ExpectInvalid(OneTensor(R"({"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 12]})", 24),
                "tensor \"w\": data_offsets [0, 12] hold 12 bytes but dtype F32 and shape "
                "[2,3] need 24");
  ExpectInvalid(OneTensor(R"({"dtype": "BF16", "shape": [3], "data_offsets": [0, 12]})", 12),
                "hold 12 bytes but dtype BF16 and shape [3] need 6");
}

TEST(SafetensorsTest, OverlappingTensors) {
  ExpectInvalid(AssembleSafetensors(
                    R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                        "b": {"dtype": "U8", "shape": [4], "data_offsets": [3, 7]}})",
                    std::string(8, 'x')),
                "tensor \"b\" (bytes [3, 7)) overlaps tensor \"a\" (bytes [0, 4))");
  // Names sort opposite to offsets: the check sorts by offset, not by name.
  ExpectInvalid(AssembleSafetensors(
                    R"({"z": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                        "m": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
                        "a": {"dtype": "U8", "shape": [4], "data_offsets": [3, 7]}})",
                    std::string(8, 'x')),
                "overlaps tensor");
  // Adjacent, gapped and empty tensors are fine.
  auto header = Parse(AssembleSafetensors(
      R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
          "b": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
          "c": {"dtype": "I32", "shape": [0], "data_offsets": [5, 5]},
          "d": {"dtype": "I16", "shape": [1], "data_offsets": [8, 10]}})",
      std::string(10, 'x')));
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->tensors.size(), 4u);
  EXPECT_EQ(header->tensors.at("d").begin, 8u);
  EXPECT_EQ(header->tensors.at("d").dtype, SafetensorsDType::kI16);
}

TEST(SafetensorsTest, Metadata) {
  ExpectInvalid(AssembleSafetensors(R"({"__metadata__": {"format": 1}})", ""),
                "\"__metadata__\" entry \"format\" must be a string, got 1");
  ExpectInvalid(AssembleSafetensors(R"({"__metadata__": ["pt"]})", ""),
                "\"__metadata__\" must be an object of strings");
  auto header = Parse(AssembleSafetensors(R"({"__metadata__": {"a": "b", "c": ""}})", ""));
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.size(), 2u);
  EXPECT_EQ(header->metadata.at("a"), "b");
  EXPECT_TRUE(header->tensors.empty());
}

TEST(SafetensorsTest, DTypeSizes) {
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kF32), 4);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kF16), 2);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kBF16), 2);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kF64), 8);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kI64), 8);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kI32), 4);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kU8), 1);
  EXPECT_EQ(SafetensorsDTypeSize(SafetensorsDType::kI8), 1);
  EXPECT_STREQ(SafetensorsDTypeName(SafetensorsDType::kBF16), "BF16");
}

}  // namespace
}  // namespace tandem
