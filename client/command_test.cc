#include "client/command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/flags/flag.h"

ABSL_FLAG(int, test_count, 3, "count");
ABSL_FLAG(bool, test_loud, false, "loud");
ABSL_FLAG(std::string, test_word, "", "word");

namespace tandem::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Command Echo(Invocation* seen) {
  Command c;
  c.name = "echo";
  c.summary = "Echoes.";
  c.usage = "Usage: tandem echo [flags] WORDS";
  c.flags = {{"test_count", "N", "How many."},
             {"test_loud", "", "Shout."},
             {"test_word", "TEXT", "A word."}};
  c.repeatable = {"test_word"};
  c.run = [seen](const Invocation& inv) {
    *seen = inv;
    return absl::GetFlag(FLAGS_test_count);
  };
  return c;
}

int Call(const std::vector<Command>& commands, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return RunCli(commands, static_cast<int>(args.size()), argv.data());
}

TEST(CommandHelpTest, ShowsDashedFlagsDefaultsAndRepeatability) {
  Invocation seen;
  const std::string help = CommandHelp(Echo(&seen));
  EXPECT_THAT(help, HasSubstr("Usage: tandem echo"));
  EXPECT_THAT(help, HasSubstr("--test-count=N\n      How many. Default: 3."));
  EXPECT_THAT(help, HasSubstr("--test-loud\n      Shout.\n"));  // No "Default: false".
  EXPECT_THAT(help, HasSubstr("--test-word=TEXT\n      A word. Repeatable."));
  EXPECT_THAT(ProgramHelp({Echo(&seen)}), HasSubstr("  echo  Echoes."));
}

TEST(RunCliTest, ParsesDashedFlagsAndPassesPositionals) {
  Invocation seen;
  const int rc = Call({Echo(&seen)}, {"tandem", "echo", "--test-count", "7", "--test-loud", "a",
                                      "--test-word=x", "--test-word", "y", "b"});
  EXPECT_EQ(rc, 7);
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_loud));
  EXPECT_THAT(seen.positional, ElementsAre("a", "b"));
  EXPECT_THAT(seen.repeated["test_word"], ElementsAre("x", "y"));
  EXPECT_EQ(seen.specified, (std::set<std::string>{"test_count", "test_loud", "test_word"}));
  EXPECT_EQ(seen.command_line.size(), 10u);
  absl::SetFlag(&FLAGS_test_count, 3);
  absl::SetFlag(&FLAGS_test_loud, false);
}

TEST(RunCliTest, UsageErrorsReturnTwo) {
  Invocation seen;
  EXPECT_EQ(Call({Echo(&seen)}, {"tandem", "nope"}), 2);
  EXPECT_EQ(Call({Echo(&seen)}, {"tandem", "echo", "--other-flag=1"}), 2);
  EXPECT_EQ(Call({Echo(&seen)}, {"tandem"}), 2);
  EXPECT_EQ(Call({Echo(&seen)}, {"tandem", "echo", "--help"}), 0);
  EXPECT_EQ(Call({Echo(&seen)}, {"tandem", "help", "echo"}), 0);
  EXPECT_EQ(Call({Echo(&seen)}, {"tandem", "--help"}), 0);
}

}  // namespace
}  // namespace tandem::client
