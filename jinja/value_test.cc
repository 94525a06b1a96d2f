#include "jinja/value.h"

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

TEST(ValueTest, PrintsLikeTheReference) {
  EXPECT_EQ(Value().ToString(), "");
  EXPECT_EQ(Value::None().ToString(), "");
  EXPECT_EQ(Value::Bool(true).ToString(), "true");
  EXPECT_EQ(Value::Int(-42).ToString(), "-42");
  EXPECT_EQ(Value::Float(2).ToString(), "2.0");
  EXPECT_EQ(Value::Float(-0.0).ToString(), "-0.0");
  EXPECT_EQ(Value::Float(0.1 + 0.2).ToString(), "0.30000000000000004");
  EXPECT_EQ(Value::String("x").ToString(), "x");
  ValueDict dict;
  dict.Set("b", Value::Int(1));
  dict.Set("a", Value::List({Value::String("q\"\n"), Value::None(), Value::Float(1.5)}));
  EXPECT_EQ(Value::Dict(dict).ToString(), R"({"b": 1, "a": ["q\"\n", null, 1.5]})");
}

TEST(ValueTest, FormatsNumbersLikeJavaScript) {
  EXPECT_EQ(FormatJsNumber(1e21), "1e+21");
  EXPECT_EQ(FormatJsNumber(1.5e-7), "1.5e-7");
  EXPECT_EQ(FormatJsNumber(0.000001), "0.000001");
  EXPECT_EQ(FormatJsNumber(123456.789), "123456.789");
  EXPECT_EQ(FormatJsNumber(-2.5), "-2.5");
  EXPECT_EQ(FormatJsNumber(1e20), "100000000000000000000");
}

TEST(ValueTest, JsonWithIndentAndEscapes) {
  ValueDict dict;
  dict.Set("k", Value::List({Value::Int(1), Value::Bool(false)}));
  dict.Set("empty", Value::List({}));
  EXPECT_EQ(Value::Dict(dict).ToJson(2),
            "{\n  \"k\": [\n    1,\n    false\n  ],\n  \"empty\": []\n}");
  EXPECT_EQ(JsonQuote("\x01\t\\é"), "\"\\u0001\\t\\\\é\"");
  EXPECT_EQ(Value().ToJson(), "null");
}

TEST(ValueTest, TruthinessAndEquality) {
  EXPECT_FALSE(Value::String("").Truthy());
  EXPECT_FALSE(Value::List({}).Truthy());
  EXPECT_FALSE(Value::Dict({}).Truthy());
  EXPECT_TRUE(Value::Namespace({}).Truthy());
  EXPECT_FALSE(Value::Int(0).Truthy());
  EXPECT_TRUE(LooseEquals(Value(), Value::None()));
  EXPECT_TRUE(LooseEquals(Value::Int(1), Value::Float(1.0)));
  EXPECT_TRUE(LooseEquals(Value::Bool(true), Value::Int(1)));
  EXPECT_FALSE(LooseEquals(Value::String("1"), Value::Int(1)));
  const Value list = Value::List({Value::Int(1)});
  EXPECT_TRUE(LooseEquals(list, list));
  EXPECT_FALSE(LooseEquals(list, Value::List({Value::Int(1)})));
}

TEST(ValueTest, ContainersAreShared) {
  const Value ns = Value::Namespace({});
  const Value copy = ns;
  copy.mutable_dict().Set("x", Value::Int(3));
  ASSERT_NE(ns.dict().Find("x"), nullptr);
  EXPECT_EQ(ns.dict().Find("x")->int_value(), 3);
}

TEST(ValueTest, FromJsonKeepsKeyOrder) {
  const Value v =
      Value::FromJson(nlohmann::ordered_json::parse(R"({"z": 1, "a": [true, 2.5, null, "s"]})"));
  EXPECT_EQ(v.ToJson(), R"({"z": 1, "a": [true, 2.5, null, "s"]})");
}

}  // namespace
}  // namespace tandem::jinja
