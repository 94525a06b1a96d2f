#include "client/argv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::client {
namespace {

using ::testing::ElementsAre;

FlagSpec Spec() {
  FlagSpec spec;
  spec.flags = {{"max_tokens", false},
                {"server", false},
                {"cpu_affinity", true},
                {"stop", false},
                {"temperature", false}};
  spec.repeatable = {"stop"};
  return spec;
}

TEST(CanonicalFlagNameTest, DashesBecomeUnderscores) {
  EXPECT_EQ(CanonicalFlagName("max-tokens"), "max_tokens");
  EXPECT_EQ(CanonicalFlagName("a-b-c"), "a_b_c");
  EXPECT_EQ(CanonicalFlagName("plain"), "plain");
}

TEST(NormalizeArgsTest, DashedAndUnderscoreFormsBothWork) {
  auto n = NormalizeArgs("tandem generate",
                         {"--max-tokens=5", "--server", "h:1", "--max_tokens", "7", "hi"}, Spec());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_THAT(n->argv, ElementsAre("tandem generate", "--max_tokens=5", "--server=h:1",
                                   "--max_tokens=7", "hi"));
  EXPECT_EQ(n->specified, (std::set<std::string>{"max_tokens", "server"}));
  EXPECT_FALSE(n->help);
}

TEST(NormalizeArgsTest, BooleanFlagsDoNotSwallowTheNextArgument) {
  auto n = NormalizeArgs(
      "p", {"--cpu-affinity", "prompt", "--nocpu-affinity", "-cpu_affinity=false"}, Spec());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_THAT(n->argv, ElementsAre("p", "--cpu_affinity", "prompt", "--nocpu_affinity",
                                   "--cpu_affinity=false"));
  EXPECT_EQ(n->specified, (std::set<std::string>{"cpu_affinity"}));
}

TEST(NormalizeArgsTest, RepeatableFlagsAreCollectedInOrder) {
  auto n = NormalizeArgs("p", {"--stop", "\n\n", "x", "--stop=--", "--stop=a=b"}, Spec());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_THAT(n->argv, ElementsAre("p", "x"));
  EXPECT_THAT(n->repeated["stop"], ElementsAre("\n\n", "--", "a=b"));
}

TEST(NormalizeArgsTest, DoubleDashEndsFlags) {
  auto n = NormalizeArgs("p", {"--server=a", "--", "--not-a-flag", "-x"}, Spec());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_THAT(n->argv, ElementsAre("p", "--server=a", "--", "--not-a-flag", "-x"));
}

TEST(NormalizeArgsTest, NegativeNumberValueIsNotAFlag) {
  auto n = NormalizeArgs("p", {"--temperature", "-1"}, Spec());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_THAT(n->argv, ElementsAre("p", "--temperature=-1"));
}

TEST(NormalizeArgsTest, HelpIsDetectedAndRemoved) {
  for (const char* h : {"-h", "--help", "--helpfull", "-help"}) {
    auto n = NormalizeArgs("p", {"x", h}, Spec());
    ASSERT_TRUE(n.ok()) << h;
    EXPECT_TRUE(n->help) << h;
    EXPECT_THAT(n->argv, ElementsAre("p", "x"));
  }
  auto after = NormalizeArgs("p", {"--", "--help"}, Spec());
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->help);
}

TEST(NormalizeArgsTest, UnknownFlagIsAnErrorNamingIt) {
  auto n = NormalizeArgs("p", {"--concurrency=4"}, Spec());
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(std::string(n.status().message()), ::testing::HasSubstr("--concurrency=4"));
  // `no` prefix only negates booleans.
  EXPECT_FALSE(NormalizeArgs("p", {"--noserver"}, Spec()).ok());
  EXPECT_FALSE(NormalizeArgs("p", {"--nocpu-affinity=1"}, Spec()).ok());
}

TEST(NormalizeArgsTest, MissingValueIsAnError) {
  auto n = NormalizeArgs("p", {"--server"}, Spec());
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(std::string(n.status().message()), ::testing::HasSubstr("needs a value"));
}

TEST(NormalizeArgsTest, LoneDashIsPositional) {
  auto n = NormalizeArgs("p", {"-"}, Spec());
  ASSERT_TRUE(n.ok());
  EXPECT_THAT(n->argv, ElementsAre("p", "-"));
}

}  // namespace
}  // namespace tandem::client
