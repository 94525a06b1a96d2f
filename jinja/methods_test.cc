#include "jinja/methods.h"

#include "gtest/gtest.h"

namespace tandem::jinja {
namespace {

Value Call(const Value& object, const std::string& method, ValueList args = {},
           ValueDict kwargs = {}) {
  const Value function = GetAttribute(object, method);
  EXPECT_EQ(function.kind(), Value::Kind::kFunction) << method;
  return function.function()(args, kwargs);
}

std::string Json(const Value& value) { return value.ToJson(); }

TEST(MethodsTest, StringMethods) {
  const Value text = Value::String("  <think>a</think>\n\nb  ");
  EXPECT_EQ(Call(text, "strip").string_value(), "<think>a</think>\n\nb");
  // Like the reference, a characters argument is ignored: all whitespace goes.
  EXPECT_EQ(Call(Value::String("\n x \n"), "strip", {Value::String("\n")}).string_value(), "x");
  EXPECT_EQ(Call(text, "rstrip").string_value(), "  <think>a</think>\n\nb");
  EXPECT_EQ(Call(text, "lstrip").string_value(), "<think>a</think>\n\nb  ");
  EXPECT_EQ(Json(Call(text, "split", {Value::String("</think>")})), R"(["  <think>a", "\n\nb  "])");
  EXPECT_EQ(Json(Call(Value::String(" a  b c "), "split")), R"(["a", "b", "c"])");
  EXPECT_EQ(Json(Call(Value::String("a,b,c"), "split", {Value::String(","), Value::Int(1)})),
            R"(["a", "b,c"])");
  EXPECT_TRUE(Call(text, "startswith", {Value::String("  <")}).bool_value());
  EXPECT_FALSE(Call(text, "endswith", {Value::String("b")}).bool_value());
  EXPECT_TRUE(Call(text, "endswith", {Value::List({Value::String("x"), Value::String("  ")})})
                  .bool_value());
  EXPECT_EQ(Call(Value::String("aXbXc"), "replace", {Value::String("X"), Value::String("--")})
                .string_value(),
            "a--b--c");
  EXPECT_EQ(Call(Value::String("hello"), "upper").string_value(), "HELLO");
  EXPECT_EQ(Call(Value::String("hello"), "capitalize").string_value(), "Hello");
  EXPECT_EQ(GetAttribute(Value::String("é😀"), "length").int_value(), 3);
  EXPECT_TRUE(GetAttribute(text, "no_such_method").is_undefined());
}

TEST(MethodsTest, DictAndListAttributes) {
  ValueDict entries;
  entries.Set("role", Value::String("user"));
  entries.Set("n", Value::Int(2));
  const Value dict = Value::Dict(entries);
  EXPECT_EQ(GetAttribute(dict, "role").string_value(), "user");
  EXPECT_TRUE(GetAttribute(dict, "missing").is_undefined());
  EXPECT_EQ(Json(Call(dict, "items")), R"([["role", "user"], ["n", 2]])");
  EXPECT_EQ(Json(Call(dict, "keys")), R"(["role", "n"])");
  EXPECT_EQ(Call(dict, "get", {Value::String("x"), Value::Int(7)}).int_value(), 7);
  EXPECT_TRUE(Call(dict, "get", {Value::String("x")}).is_none());
  const Value list = Value::List({Value::Int(1), Value::Int(2), Value::Int(3)});
  EXPECT_EQ(GetAttribute(list, "length").int_value(), 3);
  EXPECT_EQ(GetIndex(list, -1).int_value(), 3);
  EXPECT_TRUE(GetIndex(list, 3).is_undefined());
  EXPECT_EQ(GetIndex(Value::String("aé"), 1).string_value(), "é");
  EXPECT_TRUE(GetAttribute(Value(), "anything").is_undefined());
}

TEST(MethodsTest, Globals) {
  const ValueDict globals = MakeGlobals([] { return std::time_t{0}; });
  ValueDict kwargs;
  kwargs.Set("count", Value::Int(0));
  const Value ns = globals.Find("namespace")->function()({}, kwargs);
  EXPECT_EQ(ns.kind(), Value::Kind::kNamespace);
  EXPECT_EQ(Json(ns), R"({"count": 0})");
  EXPECT_EQ(Json(globals.Find("range")->function()({Value::Int(3)}, {})), "[0, 1, 2]");
  EXPECT_EQ(
      Json(globals.Find("range")->function()({Value::Int(5), Value::Int(0), Value::Int(-2)}, {})),
      "[5, 3, 1]");
  EXPECT_TRUE(globals.Find("True")->bool_value());
  EXPECT_TRUE(globals.Find("none")->is_none());
  try {
    globals.Find("raise_exception")->function()({Value::String("bad input")}, {});
    FAIL() << "raise_exception returned";
  } catch (const TemplateRaised& raised) {
    EXPECT_STREQ(raised.what(), "bad input");
  }
  EXPECT_THROW(globals.Find("range")->function()({Value::Int(1), Value::Int(2), Value::Int(0)}, {}),
               JinjaError);
}

}  // namespace
}  // namespace tandem::jinja
