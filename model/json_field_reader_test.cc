#include "model/json_field_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tandem {
namespace {

using Json = nlohmann::json;

const Json kObject = Json::parse(R"({
  "n": 7, "negative": -3, "big": 18446744073709551615, "real": 1.0, "text": "abc",
  "flag": true, "null": null, "x": 0.5, "zero": 0, "huge": 1e300
})");

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(JsonFieldReaderTest, HasIsFalseForMissingAndNull) {
  const JsonFieldReader r(kObject, "cfg.json");
  EXPECT_TRUE(r.Has("n"));
  EXPECT_FALSE(r.Has("null"));
  EXPECT_FALSE(r.Has("absent"));
}

TEST(JsonFieldReaderTest, IntChecksRangeTypeAndFallback) {
  const JsonFieldReader r(kObject, "cfg.json");
  int out = 0;
  ASSERT_TRUE(r.Int("n", 1, 10, nullptr, &out).ok());
  EXPECT_EQ(out, 7);
  ASSERT_TRUE(r.Int("negative", -5, 0, nullptr, &out).ok());
  EXPECT_EQ(out, -3);
  const int fallback = 42;
  ASSERT_TRUE(r.Int("null", 0, 100, &fallback, &out).ok());
  EXPECT_EQ(out, 42);
  EXPECT_EQ(Message(r.Int("absent", 0, 1, nullptr, &out)), "cfg.json: field \"absent\" is missing");
  EXPECT_EQ(Message(r.Int("n", 8, 10, nullptr, &out)),
            "cfg.json: field \"n\" is 7, outside [8, 10]");
  EXPECT_EQ(Message(r.Int("big", 0, 1000, nullptr, &out)),
            "cfg.json: field \"big\" is 18446744073709551615, above the limit 1000");
  EXPECT_EQ(Message(r.Int("real", 0, 10, nullptr, &out)),
            "cfg.json: field \"real\" must be an integer, got 1.0");
  EXPECT_TRUE(absl::IsInvalidArgument(r.Int("text", 0, 10, nullptr, &out)));
}

TEST(JsonFieldReaderTest, IntValueNamesTheFieldWithThePrefix) {
  const JsonFieldReader r(kObject, "cfg.json", "rope_scaling.");
  int out = 0;
  EXPECT_EQ(Message(r.IntValue(Json(-1), "ids[2]", 0, 9, &out)),
            "cfg.json: field \"rope_scaling.ids[2]\" is -1, outside [0, 9]");
  ASSERT_TRUE(r.IntValue(Json(9), "ids[0]", 0, 9, &out).ok());
  EXPECT_EQ(out, 9);
}

TEST(JsonFieldReaderTest, IntOrIntListTakesOneIdOrAList) {
  const Json object = Json::parse(R"({"one": 2, "list": [1, 5, 9], "empty": [],
                                      "mixed": [1, "x"], "wide": [1, 99]})");
  const JsonFieldReader r(object, "g.json");
  std::vector<int> out = {7};
  ASSERT_TRUE(r.IntOrIntList("one", 0, 10, &out).ok());
  EXPECT_EQ(out, std::vector<int>({2}));
  ASSERT_TRUE(r.IntOrIntList("list", 0, 10, &out).ok());
  EXPECT_EQ(out, std::vector<int>({1, 5, 9}));
  EXPECT_EQ(Message(r.IntOrIntList("empty", 0, 10, &out)),
            "g.json: field \"empty\" is an empty list");
  EXPECT_EQ(Message(r.IntOrIntList("mixed", 0, 10, &out)),
            "g.json: field \"mixed\" must be an integer, got \"x\"");
  EXPECT_EQ(Message(r.IntOrIntList("wide", 0, 10, &out)),
            "g.json: field \"wide\" is 99, above the limit 10");
  EXPECT_EQ(Message(r.IntOrIntList("absent", 0, 10, &out)), "g.json: field \"absent\" is missing");
}

TEST(JsonFieldReaderTest, PositiveNumberRejectsZeroNonNumbersAndFloatOverflow) {
  const JsonFieldReader r(kObject, "cfg.json");
  double out = 0;
  ASSERT_TRUE(r.PositiveNumber("x", nullptr, &out).ok());
  EXPECT_EQ(out, 0.5);
  ASSERT_TRUE(r.PositiveNumber("n", nullptr, &out).ok());
  EXPECT_EQ(out, 7.0);
  const double fallback = 2.5;
  ASSERT_TRUE(r.PositiveNumber("absent", &fallback, &out).ok());
  EXPECT_EQ(out, 2.5);
  EXPECT_EQ(Message(r.PositiveNumber("zero", nullptr, &out)),
            "cfg.json: field \"zero\" must be a positive number, got 0");
  EXPECT_EQ(Message(r.PositiveNumber("text", nullptr, &out)),
            "cfg.json: field \"text\" must be a number, got \"abc\"");
  EXPECT_EQ(Message(r.PositiveNumber("huge", nullptr, &out)),
            "cfg.json: field \"huge\" is too large for float32: 1e+300");
  EXPECT_FALSE(r.PositiveNumber("absent", nullptr, &out).ok());
}

TEST(JsonFieldReaderTest, BoolAndStringWithDefaults) {
  const JsonFieldReader r(kObject, "cfg.json");
  bool flag = false;
  ASSERT_TRUE(r.Bool("flag", false, &flag).ok());
  EXPECT_TRUE(flag);
  ASSERT_TRUE(r.Bool("absent", true, &flag).ok());
  EXPECT_TRUE(flag);
  EXPECT_EQ(Message(r.Bool("n", false, &flag)),
            "cfg.json: field \"n\" must be true or false, got 7");
  std::string text = "old";
  ASSERT_TRUE(r.String("text", &text).ok());
  EXPECT_EQ(text, "abc");
  ASSERT_TRUE(r.String("absent", &text).ok());
  EXPECT_EQ(text, "");
  EXPECT_EQ(Message(r.String("flag", &text)),
            "cfg.json: field \"flag\" must be a string, got true");
}

}  // namespace
}  // namespace tandem
