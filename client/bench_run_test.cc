#include "client/bench_run.h"

#include <gtest/gtest.h>

namespace tandem::client {
namespace {

BenchSettings Settings() {
  BenchSettings s;
  s.prompts = {"alpha", "beta", "gamma"};
  s.request.k = 4;
  s.request.max_tokens = 16;
  return s;
}

TEST(MakeBenchRequestTest, CyclesPromptsAndAppliesTheKey) {
  const BenchSettings s = Settings();
  ConfigKey key{v1::SPECULATION_METHOD_DRAFT, v1::PIPELINING_OFF, 4, v1::ACCEPTANCE_RULE_REJECTION};
  int prompt = -1;
  const v1::GenerateRequest r = MakeBenchRequest(s, key, 4, &prompt);
  EXPECT_EQ(prompt, 1);  // 4 % 3.
  EXPECT_EQ(r.text(), "beta");
  EXPECT_EQ(r.speculation().method(), v1::SPECULATION_METHOD_DRAFT);
  EXPECT_EQ(r.speculation().num_speculative_tokens(), 4);
  EXPECT_EQ(r.speculation().pipelining(), v1::PIPELINING_OFF);
  EXPECT_EQ(r.speculation().acceptance_rule(), v1::ACCEPTANCE_RULE_REJECTION);
  EXPECT_FALSE(r.sampling().has_seed());
}

TEST(MakeBenchRequestTest, TheAaControlSendsExactlyWhatNoneSends) {
  BenchSettings s = Settings();
  s.seed = 7;
  const ConfigKey none{v1::SPECULATION_METHOD_NONE, v1::PIPELINING_DEFAULT, 4,
                       v1::ACCEPTANCE_RULE_COUPLED};
  ConfigKey control = none;
  control.aa_control = true;
  for (int number : {0, 1, 5}) {
    int none_prompt = -1, control_prompt = -2;
    const v1::GenerateRequest a = MakeBenchRequest(s, none, number, &none_prompt);
    const v1::GenerateRequest b = MakeBenchRequest(s, control, number, &control_prompt);
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << number;
    EXPECT_EQ(none_prompt, control_prompt);
  }
}

TEST(MakeBenchRequestTest, NoneDropsTheFixedKAndSeedsFollowThePrompt) {
  BenchSettings s = Settings();
  s.seed = 100;
  ConfigKey none{v1::SPECULATION_METHOD_NONE};
  int prompt = -1;
  const v1::GenerateRequest r = MakeBenchRequest(s, none, 5, &prompt);
  EXPECT_EQ(prompt, 2);
  EXPECT_FALSE(r.speculation().has_num_speculative_tokens());
  EXPECT_EQ(r.sampling().seed(), 102u);
}

TEST(MakeBenchRequestTest, ARowsTreeBudgetReplacesTheSettingsOne) {
  BenchSettings s = Settings();
  s.request.tree_nodes = 16;
  ConfigKey key{v1::SPECULATION_METHOD_DRAFT};
  int prompt = -1;
  EXPECT_EQ(MakeBenchRequest(s, key, 0, &prompt).speculation().draft_tree_nodes(), 16);
  key.tree_nodes = 0;
  const v1::GenerateRequest chains = MakeBenchRequest(s, key, 0, &prompt);
  ASSERT_TRUE(chains.speculation().has_draft_tree_nodes());
  EXPECT_EQ(chains.speculation().draft_tree_nodes(), 0);
  key.tree_nodes = kServerTreeNodes;
  EXPECT_FALSE(MakeBenchRequest(s, key, 0, &prompt).speculation().has_draft_tree_nodes());
}

TEST(AppendRunTest, ChunksOfARunAddUp) {
  ConfigRun run;
  run.results.resize(2);
  run.prompt_index = {0, 1};
  run.wall_s = 1.5;
  ConfigRun part;
  part.results.resize(3);
  part.prompt_index = {2, 0, 1};
  part.wall_s = 2.0;
  AppendRun(std::move(part), &run);
  EXPECT_EQ(run.results.size(), 5u);
  EXPECT_EQ(run.prompt_index, std::vector<int>({0, 1, 2, 0, 1}));
  EXPECT_DOUBLE_EQ(run.wall_s, 3.5);
}

TEST(IsoTimeTest, FormatsUtc) {
  EXPECT_EQ(IsoTime(absl::FromUnixSeconds(86400 + 3661)), "1970-01-02T01:01:01Z");
}

}  // namespace
}  // namespace tandem::client
