#include "jinja/filters.h"

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

Value Filter(const std::string& name, const Value& operand, ValueList args = {},
             ValueDict kwargs = {}) {
  return ApplyFilter(name, operand, args, kwargs);
}

Value Message(const std::string& role, const std::string& content) {
  ValueDict entries;
  entries.Set("role", Value::String(role));
  entries.Set("content", Value::String(content));
  return Value::Dict(entries);
}

TEST(FiltersTest, StringsAndLists) {
  EXPECT_EQ(Filter("trim", Value::String("\n hi \xE3\x80\x80")).string_value(), "hi");
  EXPECT_EQ(Filter("length", Value::String("añ")).int_value(), 2);
  EXPECT_EQ(Filter("upper", Value::String("ab")).string_value(), "AB");
  const Value list = Value::List({Value::Int(1), Value::String("b"), Value::Bool(true)});
  EXPECT_EQ(Filter("length", list).int_value(), 3);
  EXPECT_EQ(Filter("first", list).int_value(), 1);
  EXPECT_TRUE(Filter("last", list).bool_value());
  EXPECT_EQ(Filter("reverse", list).ToJson(), R"([true, "b", 1])");
  EXPECT_EQ(Filter("join", list, {Value::String(", ")}).string_value(), "1, b, true");
  EXPECT_EQ(Filter("string", list).string_value(), R"([1, "b", true])");
  EXPECT_EQ(Filter("indent", Value::String("a\n\nb"), {Value::Int(2)}).string_value(), "a\n\n  b");
  EXPECT_EQ(Filter("int", Value::String("42abc")).int_value(), 42);
  EXPECT_EQ(Filter("replace", Value::String("a-b"), {Value::String("-"), Value::String("+")})
                .string_value(),
            "a+b");
}

TEST(FiltersTest, ToJson) {
  const Value message = Message("user", "Grüße \"x\"\n");
  EXPECT_EQ(Filter("tojson", message).string_value(),
            R"({"role": "user", "content": "Grüße \"x\"\n"})");
  ValueDict indent;
  indent.Set("indent", Value::Int(2));
  EXPECT_EQ(Filter("tojson", Value::List({Value::Int(1)}), {}, indent).string_value(), "[\n  1\n]");
  ValueDict sort;
  sort.Set("sort_keys", Value::Bool(true));
  EXPECT_THROW(Filter("tojson", message, {}, sort), JinjaError);
}

TEST(FiltersTest, SelectAttrMapDefault) {
  const Value messages = Value::List({Message("system", "s"), Message("user", "u1"),
                                      Message("assistant", "a"), Message("user", "u2")});
  const Value users =
      Filter("selectattr", messages,
             {Value::String("role"), Value::String("equalto"), Value::String("user")});
  EXPECT_EQ(Filter("length", users).int_value(), 2);
  const Value others =
      Filter("rejectattr", messages,
             {Value::String("role"), Value::String("equalto"), Value::String("user")});
  ValueDict attribute;
  attribute.Set("attribute", Value::String("content"));
  EXPECT_EQ(Filter("map", others, {}, attribute).ToJson(), R"(["s", "a"])");
  EXPECT_EQ(Filter("default", Value(), {Value::String("d")}).string_value(), "d");
  EXPECT_EQ(Filter("default", Value::String(""), {Value::String("d")}).string_value(), "");
  EXPECT_EQ(
      Filter("default", Value::String(""), {Value::String("d"), Value::Bool(true)}).string_value(),
      "d");
}

TEST(FiltersTest, ErrorsNameTheFilter) {
  try {
    Filter("frobnicate", Value::String("x"));
    FAIL();
  } catch (const JinjaError& error) {
    EXPECT_STREQ(error.what(), "Unknown filter: frobnicate");
  }
  try {
    Filter("trim", Value::Int(3));
    FAIL();
  } catch (const JinjaError& error) {
    EXPECT_STREQ(error.what(), "Cannot apply filter \"trim\" to type: IntegerValue");
  }
  EXPECT_THROW(Filter("length", Value::String("x"), {Value::Int(1)}), JinjaError);
}

TEST(FiltersTest, Tests) {
  EXPECT_TRUE(ApplyTest("defined", Value::None()));
  EXPECT_FALSE(ApplyTest("defined", Value()));
  EXPECT_TRUE(ApplyTest("none", Value::None()));
  EXPECT_FALSE(ApplyTest("none", Value()));
  EXPECT_TRUE(ApplyTest("string", Value::String("")));
  EXPECT_TRUE(ApplyTest("iterable", Value::String("")));
  EXPECT_FALSE(ApplyTest("iterable", Value::Dict({})));
  EXPECT_TRUE(ApplyTest("mapping", Value::Dict({})));
  EXPECT_TRUE(ApplyTest("false", Value::Bool(false)));
  EXPECT_FALSE(ApplyTest("false", Value::Int(0)));
  EXPECT_TRUE(ApplyTest("odd", Value::Int(3)));
  EXPECT_THROW(ApplyTest("odd", Value::Float(3)), JinjaError);
  EXPECT_TRUE(ApplyTest("equalto", Value::Int(2), Value::Float(2)));
  EXPECT_THROW(ApplyTest("prime", Value::Int(3)), JinjaError);
}

}  // namespace
}  // namespace tandem::jinja
