#include "jinja/operators.h"

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

std::string Binary(const std::string& op, const Value& a, const Value& b) {
  const Value result = ValueBinary(op, a, b);
  return result.TypeName() + ":" + result.ToString();
}

TEST(OperatorsTest, Arithmetic) {
  EXPECT_EQ(Binary("+", Value::Int(2), Value::Int(3)), "IntegerValue:5");
  EXPECT_EQ(Binary("+", Value::Int(2), Value::Float(0.5)), "FloatValue:2.5");
  EXPECT_EQ(Binary("/", Value::Int(4), Value::Int(2)), "FloatValue:2.0");
  EXPECT_EQ(Binary("//", Value::Int(-7), Value::Int(2)), "IntegerValue:-4");
  EXPECT_EQ(Binary("%", Value::Int(7), Value::Int(2)), "IntegerValue:1");
  EXPECT_EQ(Binary("-", Value::Int(3), Value::Int(5)), "IntegerValue:-2");
  EXPECT_EQ(Binary("<", Value::Int(1), Value::Float(1.5)), "BooleanValue:true");
  EXPECT_THROW(ValueBinary("%", Value::Int(1), Value::Int(0)), JinjaError);
}

TEST(OperatorsTest, StringsAndLists) {
  EXPECT_EQ(Binary("+", Value::String("a"), Value::Int(1)), "StringValue:a1");
  EXPECT_EQ(Binary("~", Value::Bool(true), Value::Int(1)), "StringValue:true1");
  EXPECT_EQ(Binary("~", Value::String("a"), Value()), "StringValue:a");
  EXPECT_EQ(Binary("in", Value::String("ell"), Value::String("hello")), "BooleanValue:true");
  EXPECT_EQ(Binary("not in", Value::Int(2), Value::List({Value::Int(1)})), "BooleanValue:true");
  ValueDict dict;
  dict.Set("k", Value::None());
  EXPECT_EQ(Binary("in", Value::String("k"), Value::Dict(dict)), "BooleanValue:true");
  EXPECT_EQ(Binary("in", Value::String("k"), Value()), "BooleanValue:false");
  EXPECT_EQ(ValueBinary("+", Value::List({Value::Int(1)}), Value::List({Value::Int(2)})).ToJson(),
            "[1, 2]");
  EXPECT_EQ(Binary("==", Value(), Value::None()), "BooleanValue:true");
  EXPECT_EQ(Binary("!=", Value::String("a"), Value::String("b")), "BooleanValue:true");
}

TEST(OperatorsTest, TypeErrorsNameTheOperands) {
  try {
    ValueBinary("-", Value::String("a"), Value::Int(1));
    FAIL();
  } catch (const JinjaError& error) {
    EXPECT_STREQ(error.what(), "Unknown operator \"-\" between StringValue and IntegerValue");
  }
  EXPECT_THROW(ValueBinary("+", Value::String("a"), Value()), JinjaError);
  EXPECT_THROW(ValueBinary("+", Value::None(), Value::String("a")), JinjaError);
  EXPECT_THROW(ValueBinary("<", Value::String("a"), Value::String("b")), JinjaError);
}

TEST(OperatorsTest, SliceIndicesFollowPython) {
  using V = std::vector<size_t>;
  EXPECT_EQ(SliceIndices(4, Value::Int(1), Value(), Value()), (V{1, 2, 3}));
  EXPECT_EQ(SliceIndices(4, Value(), Value(), Value::Int(-1)), (V{3, 2, 1, 0}));
  EXPECT_EQ(SliceIndices(4, Value::Int(-2), Value(), Value()), (V{2, 3}));
  EXPECT_EQ(SliceIndices(4, Value(), Value::Int(-1), Value::Int(2)), (V{0, 2}));
  EXPECT_EQ(SliceIndices(4, Value::Int(10), Value(), Value()), V{});
  EXPECT_EQ(SliceIndices(0, Value(), Value(), Value::Int(-1)), V{});
  EXPECT_THROW(SliceIndices(4, Value(), Value(), Value::Int(0)), JinjaError);
  EXPECT_THROW(SliceIndices(4, Value::String("a"), Value(), Value()), JinjaError);
}

}  // namespace
}  // namespace tandem::jinja
