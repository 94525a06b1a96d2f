// Lookahead's per-request W, N, G: ranges, defaults, fitting and their errors.
#include "coordinator/proposers/lookahead_params.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem::coordinator {
namespace {

constexpr v1::SpeculationMethod kLookahead = v1::SPECULATION_METHOD_LOOKAHEAD;
constexpr int kUnset = -1000;

v1::SpeculationParams Params(int w, int n, int g) {
  v1::SpeculationParams p;
  p.set_method(kLookahead);
  if (w != kUnset) p.mutable_lookahead()->set_window(w);
  if (n != kUnset) p.mutable_lookahead()->set_ngram(n);
  if (g != kUnset) p.mutable_lookahead()->set_max_guesses(g);
  return p;
}

std::string Error(const v1::SpeculationParams& p, int max_nodes = 128,
                  v1::SpeculationMethod method = kLookahead) {
  absl::StatusOr<LookaheadConfig> c = ResolveLookaheadParams(p, method, max_nodes);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  return std::string(c.status().message());
}

TEST(LookaheadParamsTest, ExplicitValuesAreKeptAndGDefaultsToW) {
  absl::StatusOr<LookaheadConfig> c = ResolveLookaheadParams(Params(15, 5, 15), kLookahead, 120);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window, 15);
  EXPECT_EQ(c->ngram, 5);
  EXPECT_EQ(c->max_guesses, 15);
  EXPECT_TRUE(c->fixed_window);  // Set by the client: honoured exactly.
  EXPECT_TRUE(c->fixed_guesses);
  c = ResolveLookaheadParams(Params(7, 4, kUnset), kLookahead, 128);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_guesses, 7);
  EXPECT_TRUE(c->fixed_window);
  EXPECT_FALSE(c->fixed_guesses);  // A cap of the sizing.
  c = ResolveLookaheadParams(Params(kUnset, kUnset, kUnset), kLookahead, 128);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(LookaheadMaxNodes(*c), LookaheadMaxNodes(DefaultLookaheadConfig()));
  EXPECT_FALSE(c->fixed_window);
  EXPECT_FALSE(c->fixed_guesses);
}

TEST(LookaheadParamsTest, DefaultsShrinkToFitTheServer) {
  const LookaheadConfig d = DefaultLookaheadConfig();
  absl::StatusOr<LookaheadConfig> c = ResolveLookaheadParams(
      Params(kUnset, kUnset, kUnset), kLookahead, (d.window + 1) * (d.ngram - 1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window, d.window);
  EXPECT_EQ(c->max_guesses, 1);
  c = ResolveLookaheadParams(Params(kUnset, 3, kUnset), kLookahead, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->window, 1);
  EXPECT_EQ(c->max_guesses, 0);
}

TEST(LookaheadParamsTest, BadValuesAreRejectedWithTheirField) {
  EXPECT_NE(
      Error(Params(0, 3, 3)).find("lookahead.window = 0 is out of range; valid range [1, 64]"),
      std::string::npos);
  EXPECT_NE(Error(Params(65, 3, 3)).find("window = 65"), std::string::npos);
  EXPECT_NE(Error(Params(3, 1, 3)).find("lookahead.ngram = 1 is out of range; valid range [2, 8]"),
            std::string::npos);
  EXPECT_NE(Error(Params(3, 9, 3)).find("ngram = 9"), std::string::npos);
  EXPECT_NE(Error(Params(3, 3, -2)).find("max_guesses = -2"), std::string::npos);
  EXPECT_NE(Error(Params(3, 3, 65)).find("max_guesses = 65"), std::string::npos);
  EXPECT_NE(Error(Params(15, 5, 15), 64)
                .find("(W + G) * (N - 1) = 120 nodes per step, over this "
                      "server's max_speculative_tokens 64"),
            std::string::npos);
  EXPECT_NE(Error(Params(3, 3, 3), 64, v1::SPECULATION_METHOD_PROMPT_LOOKUP)
                .find("only used by SPECULATION_METHOD_LOOKAHEAD"),
            std::string::npos);
  EXPECT_TRUE(ResolveLookaheadParams(v1::SpeculationParams(), v1::SPECULATION_METHOD_AUTO, 8).ok());
}

}  // namespace
}  // namespace tandem::coordinator
