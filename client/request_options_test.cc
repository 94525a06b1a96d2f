#include "client/request_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseTest, MethodsRoundTripAndAcceptDashes) {
  for (const char* name : {"auto", "none", "draft", "prompt_lookup", "medusa", "lookahead"}) {
    auto m = ParseMethod(name);
    ASSERT_TRUE(m.ok()) << name;
    EXPECT_EQ(MethodName(*m), name);
  }
  EXPECT_EQ(*ParseMethod("Prompt-Lookup"), v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  EXPECT_THAT(std::string(ParseMethod("draft_model").status().message()), HasSubstr("draft_model"));
}

TEST(ParseTest, AcceptanceRulesAndPipelining) {
  EXPECT_EQ(*ParseAcceptanceRule("greedy"), v1::ACCEPTANCE_RULE_GREEDY);
  EXPECT_EQ(*ParseAcceptanceRule("typical"), v1::ACCEPTANCE_RULE_TYPICAL);
  EXPECT_EQ(*ParseAcceptanceRule("position"), v1::ACCEPTANCE_RULE_POSITION);
  EXPECT_EQ(*ParseAcceptanceRule("coupled"), v1::ACCEPTANCE_RULE_COUPLED);
  EXPECT_FALSE(ParseAcceptanceRule("strict").ok());
  EXPECT_EQ(AcceptanceRuleName(v1::ACCEPTANCE_RULE_COUPLED), "coupled");
  EXPECT_EQ(AcceptanceRuleName(v1::ACCEPTANCE_RULE_DEFAULT), "default");
  EXPECT_EQ(*ParsePipelining("on"), v1::PIPELINING_ON);
  EXPECT_EQ(*ParsePipelining("off"), v1::PIPELINING_OFF);
  EXPECT_EQ(*ParsePipelining("default"), v1::PIPELINING_DEFAULT);
  EXPECT_FALSE(ParsePipelining("yes").ok());
  EXPECT_EQ(PipeliningName(v1::PIPELINING_OFF), "off");
}

TEST(ParseTest, Lists) {
  auto methods = ParseMethodList("none,draft,prompt_lookup");
  ASSERT_TRUE(methods.ok());
  EXPECT_THAT(*methods, ElementsAre(v1::SPECULATION_METHOD_NONE, v1::SPECULATION_METHOD_DRAFT,
                                    v1::SPECULATION_METHOD_PROMPT_LOOKUP));
  EXPECT_FALSE(ParseMethodList("none,,draft").ok());
  auto rules = ParseAcceptanceRuleList("rejection,coupled");
  ASSERT_TRUE(rules.ok());
  EXPECT_THAT(*rules, ElementsAre(v1::ACCEPTANCE_RULE_REJECTION, v1::ACCEPTANCE_RULE_COUPLED));
  EXPECT_FALSE(ParseAcceptanceRuleList("coupled,strict").ok());
  auto ints = ParsePositiveIntList("1,2,16");
  ASSERT_TRUE(ints.ok());
  EXPECT_THAT(*ints, ElementsAre(1, 2, 16));
  for (const char* bad : {"", "0", "1,x", "-2", "1.5"}) {
    EXPECT_FALSE(ParsePositiveIntList(bad).ok()) << bad;
  }
  auto pipes = ParsePipeliningList("on,off");
  ASSERT_TRUE(pipes.ok());
  EXPECT_THAT(*pipes, ElementsAre(v1::PIPELINING_ON, v1::PIPELINING_OFF));
  auto trees = ParseTreeNodesList("server,0,32");
  ASSERT_TRUE(trees.ok());
  EXPECT_THAT(*trees, ElementsAre(kServerTreeNodes, 0, 32));
  for (const char* bad : {"", "-1", "server,x", "4,,8"}) {
    EXPECT_FALSE(ParseTreeNodesList(bad).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseTreeNodesList("0,x").status().message()), HasSubstr("'x'"));
}

TEST(BuildRequestTest, CarriesEveryOption) {
  RequestOptions o;
  o.max_tokens = 33;
  o.temperature = 0.7f;
  o.top_p = 0.9f;
  o.top_k = 40;
  o.seed = 12345678901234ull;
  o.method = v1::SPECULATION_METHOD_DRAFT;
  o.k = 5;
  o.accept = v1::ACCEPTANCE_RULE_POSITION;
  o.theta_first = 0.9f;
  o.theta_last = 0.6f;
  o.stop = {"\n\n", "def "};
  o.pipelining = v1::PIPELINING_OFF;
  o.ignore_eos = true;
  auto req = BuildRequest(o, "def f():");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->text(), "def f():");
  EXPECT_EQ(req->max_new_tokens(), 33u);
  EXPECT_FLOAT_EQ(req->sampling().temperature(), 0.7f);
  EXPECT_TRUE(req->sampling().has_top_p());
  EXPECT_FLOAT_EQ(req->sampling().top_p(), 0.9f);
  EXPECT_EQ(req->sampling().top_k(), 40);
  EXPECT_EQ(req->sampling().seed(), 12345678901234ull);
  EXPECT_EQ(req->speculation().method(), v1::SPECULATION_METHOD_DRAFT);
  EXPECT_EQ(req->speculation().num_speculative_tokens(), 5);
  EXPECT_EQ(req->speculation().acceptance_rule(), v1::ACCEPTANCE_RULE_POSITION);
  EXPECT_FLOAT_EQ(req->speculation().theta_first(), 0.9f);
  EXPECT_FLOAT_EQ(req->speculation().theta_last(), 0.6f);
  EXPECT_FALSE(req->speculation().has_alpha());
  EXPECT_THAT(req->stop(), ElementsAre("\n\n", "def "));
  EXPECT_EQ(req->speculation().pipelining(), v1::PIPELINING_OFF);
  EXPECT_TRUE(req->ignore_eos());
}

TEST(BuildRequestTest, UnsetOptionalsStayUnset) {
  auto req = BuildRequest(RequestOptions(), "x");
  ASSERT_TRUE(req.ok());
  EXPECT_FALSE(req->sampling().has_top_p());
  EXPECT_FALSE(req->sampling().has_seed());
  EXPECT_FALSE(req->speculation().has_num_speculative_tokens());
  // The model's defaults apply (greedy unless its generation_config.json samples).
  EXPECT_FALSE(req->sampling().has_temperature());
  EXPECT_FALSE(req->sampling().has_top_k());
}

TEST(BuildRequestTest, ExplicitZeroTemperatureAndTopKAreSent) {
  RequestOptions o;
  o.temperature = 0.0f;
  o.top_k = 0;
  auto req = BuildRequest(o, "x");
  ASSERT_TRUE(req.ok());
  EXPECT_TRUE(req->sampling().has_temperature() && req->sampling().has_top_k());
}

TEST(BuildRequestTest, RejectsObviouslyBadValuesNamingTheFlag) {
  RequestOptions o;
  EXPECT_THAT(std::string(BuildRequest(o, "").status().message()), HasSubstr("prompt"));
  o.max_tokens = 0;
  EXPECT_THAT(std::string(BuildRequest(o, "x").status().message()), HasSubstr("--max-tokens"));
  o = RequestOptions();
  o.k = -1;
  EXPECT_THAT(std::string(BuildRequest(o, "x").status().message()), HasSubstr("--k"));
  o = RequestOptions();
  o.temperature = -0.5f;
  EXPECT_THAT(std::string(BuildRequest(o, "x").status().message()), HasSubstr("--temperature"));
}

TEST(FormatStatsTest, ShowsAcceptanceAndSpeed) {
  v1::RequestStats s;
  s.set_method(v1::SPECULATION_METHOD_DRAFT);
  s.set_generated_tokens(64);
  s.set_draft_tokens_proposed(80);
  s.set_draft_tokens_accepted(60);
  s.set_acceptance_rate(0.75f);
  s.set_mean_accepted_length(3.2f);
  s.set_time_to_first_token_ms(12.5f);
  s.set_total_time_ms(4000);
  const std::string line = FormatStats(s, v1::FINISH_REASON_LENGTH, 2.0);
  EXPECT_THAT(line, HasSubstr("method=draft"));
  EXPECT_THAT(line, HasSubstr("acceptance=75.0% (60/80)"));
  EXPECT_THAT(line, HasSubstr("tok/s=32.0"));  // 64 tokens / 2 s of client time.
  EXPECT_THAT(line, HasSubstr("ttft=12.5ms"));
  EXPECT_THAT(line, HasSubstr("finish=length"));
  // Without client time the server's total time is used: 64 / 4 s.
  EXPECT_THAT(FormatStats(s, v1::FINISH_REASON_EOS, 0), HasSubstr("tok/s=16.0"));
  v1::RequestStats none;
  EXPECT_THAT(FormatStats(none, v1::FINISH_REASON_EOS, 1), HasSubstr("acceptance=-"));
  // Why speculation was off, and the controller's modelled speedup.
  (*s.mutable_speculation_off_steps())["draft_down"] = 2;
  (*s.mutable_speculation_off_steps())["controller"] = 5;
  (*s.mutable_speculation_off_steps())["not_requested"] = 1;
  s.set_predicted_speedup(1.75f);
  const std::string off = FormatStats(s, v1::FINISH_REASON_LENGTH, 2.0);
  EXPECT_THAT(off, HasSubstr(" spec_off=controller:5,draft_down:2 "));
  EXPECT_THAT(off, HasSubstr("predicted_speedup=1.75"));
}

TEST(BuildRequestTest, LookaheadSizesGoWithLookaheadOnly) {
  RequestOptions o;
  ASSERT_TRUE(ParseLookahead("7,5,3", &o).ok());
  o.method = v1::SPECULATION_METHOD_LOOKAHEAD;
  auto req = BuildRequest(o, "x");
  ASSERT_TRUE(req.ok());
  EXPECT_EQ(req->speculation().lookahead().window(), 7);
  EXPECT_EQ(req->speculation().lookahead().ngram(), 5);
  EXPECT_EQ(req->speculation().lookahead().max_guesses(), 3);
  o.method = v1::SPECULATION_METHOD_NONE;  // The `none` row of the same bench.
  EXPECT_FALSE(BuildRequest(o, "x")->speculation().has_lookahead());
  EXPECT_THAT(std::string(ParseLookahead("7,5", &o).message()), HasSubstr("--lookahead"));
  EXPECT_THAT(std::string(ParseLookahead("a,b,c", &o).message()), HasSubstr("W,N,G"));
  RequestOptions unset;
  ASSERT_TRUE(ParseLookahead("", &unset).ok());
  EXPECT_FALSE(unset.lookahead_window.has_value());
}

TEST(BuildRequestTest, TreeNodesGoWithDraftOnly) {
  RequestOptions o;
  o.tree_nodes = 32;
  o.method = v1::SPECULATION_METHOD_DRAFT;
  auto draft = BuildRequest(o, "x");
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->speculation().draft_tree_nodes(), 32);
  o.method = v1::SPECULATION_METHOD_NONE;
  EXPECT_FALSE(BuildRequest(o, "x")->speculation().has_draft_tree_nodes());
  o.method = v1::SPECULATION_METHOD_DRAFT;
  o.tree_nodes.reset();
  EXPECT_FALSE(BuildRequest(o, "x")->speculation().has_draft_tree_nodes());
  o.tree_nodes = -1;
  EXPECT_THAT(std::string(BuildRequest(o, "x").status().message()), HasSubstr("--tree-nodes"));
}

}  // namespace
}  // namespace tandem::client
