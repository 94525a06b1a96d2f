#include "spec/acceptance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Dense = std::vector<float>;

// Owns K+1 dense target distributions and exposes them as spans.
struct Targets {
  explicit Targets(std::vector<Dense> dists) : dists(std::move(dists)) {
    for (const Dense& d : this->dists) spans.push_back(absl::MakeConstSpan(d));
  }
  std::vector<Dense> dists;
  std::vector<absl::Span<const float>> spans;
};

AcceptanceParams Rule(AcceptanceRule rule) {
  AcceptanceParams params;
  params.rule = rule;
  return params;
}

AcceptanceResult RunRule(const std::vector<Proposal>& proposals, const Targets& targets,
                         const AcceptanceParams& params, RandomKey key = {1, 0}) {
  absl::StatusOr<AcceptanceResult> result = AcceptProposals(proposals, targets.spans, params, key);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : AcceptanceResult{};
}

absl::Status RunStatus(const std::vector<Proposal>& proposals, const Targets& targets,
                       const AcceptanceParams& params) {
  return AcceptProposals(proposals, targets.spans, params, {1, 0}).status();
}

Proposal Propose(int32_t token) { return Proposal{token, PointMass(token)}; }

// Probability vector with `value` at `token`, the rest spread evenly over the others.
Dense WithMassAt(int vocab, int token, float value) {
  Dense p(vocab, (1.0f - value) / (vocab - 1));
  p[token] = value;
  return p;
}

// What the documented kResample draw samples from p at `position`.
int32_t ResampleAt(const Dense& p, uint64_t seed, uint64_t position) {
  return SampleFromProbs(p, UniformDouble(seed, RandomStream::kResample, position));
}

// ---------------------------------------------------------------- parameters

TEST(AcceptanceParamsTest, NamesRoundTripAndDefaults) {
  for (AcceptanceRule rule :
       {AcceptanceRule::kGreedy, AcceptanceRule::kRejection, AcceptanceRule::kThreshold,
        AcceptanceRule::kRatio, AcceptanceRule::kPosition, AcceptanceRule::kTypical,
        AcceptanceRule::kCoupled}) {
    absl::StatusOr<AcceptanceRule> parsed = ParseAcceptanceRule(AcceptanceRuleName(rule));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, rule);
  }
  EXPECT_EQ(ParseAcceptanceRule("medusa").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AlphaOrDefault(Rule(AcceptanceRule::kThreshold)), 0.3f);
  EXPECT_EQ(AlphaOrDefault(Rule(AcceptanceRule::kRatio)), 0.5f);
  AcceptanceParams set = Rule(AcceptanceRule::kRatio);
  set.alpha = 0.8f;
  EXPECT_EQ(AlphaOrDefault(set), 0.8f);
  const AcceptanceParams defaults;
  EXPECT_EQ(defaults.theta_first, 0.95f);
  EXPECT_EQ(defaults.theta_last, 0.70f);
  EXPECT_EQ(defaults.epsilon, 0.09f);
  EXPECT_EQ(defaults.delta, 0.3f);
}

TEST(AcceptanceParamsTest, ValidationChecksRangesOfTheRuleItsParameters) {
  for (AcceptanceRule rule :
       {AcceptanceRule::kRejection, AcceptanceRule::kThreshold, AcceptanceRule::kRatio,
        AcceptanceRule::kPosition, AcceptanceRule::kTypical}) {
    EXPECT_TRUE(ValidateAcceptanceParams(Rule(rule), 0.8f).ok()) << AcceptanceRuleName(rule);
  }
  EXPECT_TRUE(ValidateAcceptanceParams(Rule(AcceptanceRule::kGreedy), 0.0f).ok());

  struct Bad {
    AcceptanceParams params;
    const char* field;
  };
  std::vector<Bad> bad;
  const auto with = [](AcceptanceRule rule, auto edit) {
    AcceptanceParams p = Rule(rule);
    edit(p);
    return p;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  bad.push_back({with(AcceptanceRule::kThreshold, [](auto& p) { p.alpha = 0.0f; }), "alpha"});
  bad.push_back({with(AcceptanceRule::kThreshold, [](auto& p) { p.alpha = 1.0f; }), "alpha"});
  bad.push_back({with(AcceptanceRule::kRatio, [](auto& p) { p.alpha = 0.0f; }), "alpha"});
  bad.push_back({with(AcceptanceRule::kRatio, [&](auto& p) { p.alpha = nan; }), "alpha"});
  bad.push_back(
      {with(AcceptanceRule::kPosition, [](auto& p) { p.theta_first = 1.5f; }), "theta_first"});
  bad.push_back(
      {with(AcceptanceRule::kPosition, [](auto& p) { p.theta_last = 0.0f; }), "theta_last"});
  bad.push_back({with(AcceptanceRule::kTypical, [](auto& p) { p.epsilon = -0.1f; }), "epsilon"});
  bad.push_back({with(AcceptanceRule::kTypical, [](auto& p) { p.delta = 2.0f; }), "delta"});
  for (const Bad& b : bad) {
    const absl::Status s = ValidateAcceptanceParams(b.params, 1.0f);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.field;
    EXPECT_THAT(std::string(s.message()), HasSubstr(b.field));
  }
  // Ratio allows alpha = 1, threshold does not; position parameters need no order.
  AcceptanceParams ratio_one = Rule(AcceptanceRule::kRatio);
  ratio_one.alpha = 1.0f;
  EXPECT_TRUE(ValidateAcceptanceParams(ratio_one, 1.0f).ok());
  AcceptanceParams rising = Rule(AcceptanceRule::kPosition);
  rising.theta_first = 0.5f;
  rising.theta_last = 1.0f;
  EXPECT_TRUE(ValidateAcceptanceParams(rising, 1.0f).ok());
  // Unused parameters are not checked; greedy needs temperature 0.
  AcceptanceParams greedy = Rule(AcceptanceRule::kGreedy);
  greedy.epsilon = 7.0f;
  EXPECT_TRUE(ValidateAcceptanceParams(greedy, 0.0f).ok());
  EXPECT_THAT(std::string(ValidateAcceptanceParams(greedy, 0.5f).message()),
              HasSubstr("temperature"));
}

// ---------------------------------------------------------------- bad input

TEST(AcceptProposalsTest, RejectsMalformedInputWithAMessage) {
  const Dense p = {0.25f, 0.25f, 0.25f, 0.25f};
  const auto expect_bad = [](absl::Status s, const char* what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(std::string(s.message()), HasSubstr(what));
  };
  const AcceptanceParams rejection = Rule(AcceptanceRule::kRejection);
  expect_bad(RunStatus({Propose(1)}, Targets({p}), rejection), "need 2 target distributions");
  expect_bad(RunStatus({}, Targets({}), rejection), "need 1 target distributions");
  expect_bad(RunStatus({}, Targets({Dense{}}), rejection), "empty");
  expect_bad(RunStatus({Propose(1)}, Targets({p, Dense{1.0f}}), rejection), "has 1 entries");
  expect_bad(RunStatus({Propose(4)}, Targets({p, p}), rejection), "token 4 outside");
  expect_bad(RunStatus({Propose(-1)}, Targets({p, p}), Rule(AcceptanceRule::kGreedy)), "outside");
  expect_bad(RunStatus({Proposal{1, SparseDistribution{}}}, Targets({p, p}), rejection),
             "at least one");
  expect_bad(RunStatus({Proposal{1, {{1, 2}, {0.5f}}}}, Targets({p, p}), rejection),
             "as many ids as probs");
  expect_bad(RunStatus({Proposal{1, {{1, 9}, {0.5f, 0.5f}}}}, Targets({p, p}), rejection),
             "q id 9 outside");
  expect_bad(RunStatus({Proposal{1, {{1, 2}, {0.5f, 0.4f}}}}, Targets({p, p}), rejection),
             "sum to");
  expect_bad(RunStatus({Proposal{1, {{1, 2}, {1.5f, -0.5f}}}}, Targets({p, p}), rejection), ">= 0");
  expect_bad(RunStatus({Proposal{1, {{1, 1}, {0.5f, 0.5f}}}}, Targets({p, p}), rejection),
             "more than once");
  expect_bad(RunStatus({Proposal{1, {{2}, {1.0f}}}}, Targets({p, p}), rejection),
             "positive probability under its q");
  expect_bad(RunStatus({Proposal{1, {{2}, {1.0f}}}}, Targets({p, p}), Rule(AcceptanceRule::kRatio)),
             "positive probability under its q");
  AcceptanceParams bad_alpha = Rule(AcceptanceRule::kThreshold);
  bad_alpha.alpha = 2.0f;
  expect_bad(RunStatus({Propose(1)}, Targets({p, p}), bad_alpha), "alpha");
  // A distribution with no mass cannot be sampled from.
  const Dense zero = {0.0f, 0.0f, 0.0f, 0.0f};
  const Dense nan(4, std::numeric_limits<float>::quiet_NaN());
  expect_bad(RunStatus({}, Targets({zero}), rejection), "no positive probability");
  expect_bad(RunStatus({}, Targets({nan}), Rule(AcceptanceRule::kGreedy)),
             "no positive probability");
  expect_bad(RunStatus({Propose(1)}, Targets({zero, p}), Rule(AcceptanceRule::kThreshold)),
             "distribution 0 has no positive probability");
  // Rules that do not read q accept proposals without one.
  EXPECT_TRUE(RunStatus({Proposal{1, {}}}, Targets({p, p}), Rule(AcceptanceRule::kThreshold)).ok());
}

// ---------------------------------------------------------------- greedy

TEST(GreedyRuleTest, AcceptsExactlyTheArgmaxMatches) {
  const Targets targets({WithMassAt(6, 3, 0.5f), WithMassAt(6, 1, 0.5f), WithMassAt(6, 4, 0.5f)});
  const AcceptanceParams greedy = Rule(AcceptanceRule::kGreedy);
  AcceptanceResult all = RunRule({Propose(3), Propose(1)}, targets, greedy);
  EXPECT_THAT(all.committed, ElementsAre(3, 1, 4));
  EXPECT_EQ(all.num_accepted, 2);
  AcceptanceResult second_wrong = RunRule({Propose(3), Propose(2)}, targets, greedy);
  EXPECT_THAT(second_wrong.committed, ElementsAre(3, 1));
  EXPECT_EQ(second_wrong.num_accepted, 1);
  AcceptanceResult first_wrong = RunRule({Propose(0), Propose(1)}, targets, greedy);
  EXPECT_THAT(first_wrong.committed, ElementsAre(3));
  EXPECT_EQ(first_wrong.num_accepted, 0);
  // Ties go to the lower index: token 2 is not the argmax of {.., 0.4, 0.4, ..}.
  const Targets tie({Dense{0.1f, 0.4f, 0.4f, 0.1f}, Dense{1, 0, 0, 0}});
  EXPECT_THAT(RunRule({Propose(2)}, tie, greedy).committed, ElementsAre(1));
  EXPECT_THAT(RunRule({Propose(1)}, tie, greedy).committed, ElementsAre(1, 0));
}

TEST(GreedyRuleTest, MatchesTargetOnlyGreedyOnRandomInputs) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (int trial = 0; trial < 500; ++trial) {
    const int vocab = 5, k = 1 + trial % 6;
    std::vector<Dense> dists(k + 1, Dense(vocab));
    for (Dense& d : dists)
      for (float& x : d) x = uniform(gen);
    std::vector<Proposal> proposals;
    for (int i = 0; i < k; ++i) {
      // Half the time propose the argmax, otherwise a random token.
      const int token = (gen() % 2) ? Argmax(dists[i]) : static_cast<int>(gen() % vocab);
      proposals.push_back(Propose(token));
    }
    const AcceptanceResult r = RunRule(proposals, Targets(dists), Rule(AcceptanceRule::kGreedy));
    // Reference: target-only greedy emits argmax p_i while the proposals agree.
    std::vector<int32_t> expected;
    int i = 0;
    while (i < k && proposals[i].token == Argmax(dists[i]))
      expected.push_back(proposals[i++].token);
    expected.push_back(Argmax(dists[i]));
    EXPECT_EQ(r.committed, expected);
    EXPECT_EQ(r.num_accepted, i);
  }
}

// ---------------------------------------------------------------- lossy rules

TEST(ThresholdRuleTest, AcceptsStrictlyAboveAlphaAndResamplesFromP) {
  const AcceptanceParams threshold = Rule(AcceptanceRule::kThreshold);  // alpha 0.3
  const Dense at = WithMassAt(5, 2, 0.3f);
  const Dense above = WithMassAt(5, 2, std::nextafter(0.3f, 1.0f));
  const Dense bonus = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
  EXPECT_EQ(RunRule({Propose(2)}, Targets({above, bonus}), threshold).num_accepted, 1);
  for (uint64_t index = 0; index < 20; ++index) {
    const AcceptanceResult r = RunRule({Propose(2)}, Targets({at, bonus}), threshold, {9, index});
    EXPECT_EQ(r.num_accepted, 0);
    EXPECT_THAT(r.committed, ElementsAre(ResampleAt(at, 9, index)));
  }
  AcceptanceParams custom = threshold;
  custom.alpha = 0.6f;
  EXPECT_EQ(RunRule({Propose(2)}, Targets({WithMassAt(5, 2, 0.59f), bonus}), custom).num_accepted,
            0);
  EXPECT_EQ(RunRule({Propose(2)}, Targets({WithMassAt(5, 2, 0.61f), bonus}), custom).num_accepted,
            1);
}

TEST(RatioRuleTest, AcceptsWhenQIsAtLeastAlphaTimesP) {
  const AcceptanceParams ratio = Rule(AcceptanceRule::kRatio);  // alpha 0.5
  const Dense p = WithMassAt(4, 0, 0.5f);
  const Dense bonus = {0.25f, 0.25f, 0.25f, 0.25f};
  const auto propose_with_q = [](float q0) {
    return Proposal{0, SparseDistribution{{0, 1}, {q0, 1.0f - q0}}};
  };
  // q(d) = 0.25 = 0.5 * 0.5: accepted (>=); just below: rejected and resampled from p.
  EXPECT_EQ(RunRule({propose_with_q(0.25f)}, Targets({p, bonus}), ratio).num_accepted, 1);
  for (uint64_t index = 0; index < 20; ++index) {
    const AcceptanceResult r = RunRule({propose_with_q(std::nextafter(0.25f, 0.0f))},
                                       Targets({p, bonus}), ratio, {4, index});
    EXPECT_EQ(r.num_accepted, 0);
    EXPECT_THAT(r.committed, ElementsAre(ResampleAt(p, 4, index)));
  }
  // A draft far more confident than the target is accepted.
  EXPECT_EQ(RunRule({propose_with_q(0.9f)}, Targets({p, bonus}), ratio).num_accepted, 1);
}

TEST(PositionRuleTest, ThresholdFallsLinearlyFromThetaFirstToThetaLast) {
  // K = 4, 0.95 -> 0.70: theta_i = 0.95 - (i/4) * 0.25.
  EXPECT_NEAR(PositionThreshold(1, 4, 0.95f, 0.70f), 0.8875, 1e-7);
  EXPECT_NEAR(PositionThreshold(2, 4, 0.95f, 0.70f), 0.825, 1e-7);
  EXPECT_NEAR(PositionThreshold(3, 4, 0.95f, 0.70f), 0.7625, 1e-7);
  EXPECT_EQ(PositionThreshold(4, 4, 0.95f, 0.70f), static_cast<double>(0.70f));
  EXPECT_EQ(PositionThreshold(1, 1, 0.95f, 0.70f), static_cast<double>(0.70f));

  const AcceptanceParams position = Rule(AcceptanceRule::kPosition);
  const float thetas[] = {0.8875f, 0.825f, 0.7625f};
  const Dense bonus = {0.5f, 0.5f, 0.0f, 0.0f};
  // Every proposal just above its threshold: all four accepted.
  std::vector<Dense> pass;
  for (float t : thetas) pass.push_back(WithMassAt(4, 1, t + 1e-4f));
  pass.push_back(WithMassAt(4, 1, 0.70f));  // Exactly theta_K: accepted (>=).
  pass.push_back(bonus);
  const std::vector<Proposal> ones(4, Propose(1));
  EXPECT_EQ(RunRule(ones, Targets(pass), position).num_accepted, 4);
  // Probability 0.8 would pass positions 3 and 4 but not 1: rejected at once.
  std::vector<Dense> fail_first = pass;
  fail_first[0] = WithMassAt(4, 1, 0.8f);
  EXPECT_EQ(RunRule(ones, Targets(fail_first), position).num_accepted, 0);
  // Each position just below its threshold stops there.
  for (int stop = 0; stop < 4; ++stop) {
    std::vector<Dense> dists = pass;
    dists[stop] = WithMassAt(4, 1, stop < 3 ? thetas[stop] - 1e-4f : std::nextafter(0.70f, 0.0f));
    const AcceptanceResult r = RunRule(ones, Targets(dists), position, {5, 100});
    EXPECT_EQ(r.num_accepted, stop);
    EXPECT_EQ(r.committed.back(), ResampleAt(dists[stop], 5, 100 + stop));
  }
}

TEST(TypicalRuleTest, EpsilonCapAndEntropyScaledBound) {
  const AcceptanceParams typical = Rule(AcceptanceRule::kTypical);  // eps 0.09, delta 0.3
  const Dense bonus = {0.5f, 0.5f};
  // Low entropy: delta * exp(-H) ~ 0.22 > epsilon, so the bound is epsilon = 0.09.
  const Dense at_eps = {0.09f, 1.0f - 0.09f};
  ASSERT_EQ(TypicalThreshold(at_eps, 0.09f, 0.3f), static_cast<double>(0.09f));
  const AcceptanceResult rejected = RunRule({Propose(0)}, Targets({at_eps, bonus}), typical);
  EXPECT_EQ(rejected.num_accepted, 0);
  EXPECT_THAT(rejected.committed, ElementsAre(1));  // Argmax of p.
  const float above = std::nextafter(0.09f, 1.0f);
  EXPECT_EQ(
      RunRule({Propose(0)}, Targets({Dense{above, 1.0f - above}, bonus}), typical).num_accepted, 1);

  // High entropy: the bound is delta * exp(-H), below epsilon.
  const Dense flat = {0.31f, 0.2f, 0.15f, 0.1f, 0.08f, 0.06f, 0.04f, 0.03f, 0.02f, 0.01f};
  double entropy = 0.0;
  for (float x : flat) entropy -= static_cast<double>(x) * std::log(static_cast<double>(x));
  const double bound = std::min(0.09, 0.3 * std::exp(-entropy));
  ASSERT_GT(bound, 0.04);  // ~0.0436 by hand: H ~ 1.93 nats.
  ASSERT_LT(bound, 0.06);
  EXPECT_NEAR(TypicalThreshold(flat, 0.09f, 0.3f), bound, 1e-7);
  const Dense flat_bonus(10, 0.1f);
  EXPECT_EQ(RunRule({Propose(5)}, Targets({flat, flat_bonus}), typical).num_accepted, 1);    // 0.06
  const AcceptanceResult low = RunRule({Propose(6)}, Targets({flat, flat_bonus}), typical);  // 0.04
  EXPECT_EQ(low.num_accepted, 0);
  EXPECT_THAT(low.committed, ElementsAre(0));
}

// ---------------------------------------------------------------- draws and lengths

TEST(AcceptProposalsTest, ZeroProposalsIsPlainDecoding) {
  const Dense p = {0.1f, 0.0f, 0.3f, 0.6f};
  for (AcceptanceRule rule :
       {AcceptanceRule::kRejection, AcceptanceRule::kThreshold, AcceptanceRule::kRatio,
        AcceptanceRule::kPosition, AcceptanceRule::kTypical}) {
    for (uint64_t index = 0; index < 50; ++index) {
      const AcceptanceResult r = RunRule({}, Targets({p}), Rule(rule), {77, index});
      EXPECT_EQ(r.num_accepted, 0);
      EXPECT_THAT(r.committed, ElementsAre(ResampleAt(p, 77, index)));
    }
  }
  EXPECT_THAT(RunRule({}, Targets({p}), Rule(AcceptanceRule::kGreedy)).committed, ElementsAre(3));
}

TEST(AcceptProposalsTest, BonusUsesTheDrawAtSampleIndexPlusK) {
  const Dense sure = {0.0f, 1.0f, 0.0f};
  const Dense bonus = {0.3f, 0.3f, 0.4f};
  for (uint64_t index = 0; index < 30; ++index) {
    const AcceptanceResult r = RunRule({Propose(1), Propose(1)}, Targets({sure, sure, bonus}),
                                       Rule(AcceptanceRule::kRejection), {12, index});
    ASSERT_EQ(r.num_accepted, 2);
    EXPECT_EQ(r.committed[2], ResampleAt(bonus, 12, index + 2));
  }
}

TEST(AcceptProposalsTest, SameKeySameResultAndKeyComponentsMatter) {
  std::mt19937 gen(8);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<Dense> dists(4, Dense(8));
  for (Dense& d : dists) {
    double sum = 0;
    for (float& x : d) sum += (x = uniform(gen));
    for (float& x : d) x = static_cast<float>(x / sum);
  }
  const Targets targets(dists);
  std::vector<Proposal> proposals;
  for (int i = 0; i < 3; ++i) {
    SparseDistribution q = TopKSparse(dists[(i + 1) % 4], 8);
    proposals.push_back({q.ids[i], q});
  }
  const AcceptanceParams rejection = Rule(AcceptanceRule::kRejection);
  int differing = 0;
  for (uint64_t index = 0; index < 100; ++index) {
    const AcceptanceResult a = RunRule(proposals, targets, rejection, {3, index});
    const AcceptanceResult b = RunRule(proposals, targets, rejection, {3, index});
    EXPECT_EQ(a.committed, b.committed);
    const AcceptanceResult other_seed = RunRule(proposals, targets, rejection, {4, index});
    if (other_seed.committed != a.committed) ++differing;
  }
  EXPECT_GT(differing, 10);
}

TEST(AcceptProposalsTest, CommittedLengthIsOneToKPlusOneForEveryRule) {
  std::mt19937 gen(21);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  for (AcceptanceRule rule :
       {AcceptanceRule::kGreedy, AcceptanceRule::kRejection, AcceptanceRule::kThreshold,
        AcceptanceRule::kRatio, AcceptanceRule::kPosition, AcceptanceRule::kTypical}) {
    std::vector<int> length_seen(9, 0);
    for (int trial = 0; trial < 400; ++trial) {
      const int vocab = 2 + trial % 5, k = trial % 8;
      std::vector<Dense> dists(k + 1, Dense(vocab));
      for (Dense& d : dists) {
        double sum = 0;
        // Peaked distributions so that every rule sometimes accepts.
        for (float& x : d) sum += (x = std::pow(uniform(gen), 6.0f));
        for (float& x : d) x = static_cast<float>(x / sum);
      }
      std::vector<Proposal> proposals;
      for (int i = 0; i < k; ++i) {
        const SparseDistribution q = TopKSparse(dists[i], 2);
        proposals.push_back({SampleFromSparse(q, uniform(gen)), q});
      }
      const AcceptanceResult r =
          RunRule(proposals, Targets(dists), Rule(rule), {static_cast<uint64_t>(trial), 0});
      ASSERT_GE(r.committed.size(), 1u);
      ASSERT_LE(r.committed.size(), static_cast<size_t>(k + 1));
      ASSERT_EQ(r.num_accepted + 1, static_cast<int>(r.committed.size()));
      for (int i = 0; i < r.num_accepted; ++i) EXPECT_EQ(r.committed[i], proposals[i].token);
      // The last token has positive target probability.
      EXPECT_GT(dists[r.num_accepted][r.committed.back()], 0.0f);
      ++length_seen[r.committed.size()];
    }
    // Both short and full-length steps happen.
    EXPECT_GT(length_seen[1], 0) << AcceptanceRuleName(rule);
    EXPECT_GT(length_seen[8], 0) << AcceptanceRuleName(rule);
  }
}

// ---------------------------------------------------------------- rejection rule

TEST(RejectionRuleTest, HandMadeCases) {
  const AcceptanceParams rejection = Rule(AcceptanceRule::kRejection);
  // p(d) >= q(d): accepted whatever u is.
  const Dense p = {0.6f, 0.4f, 0.0f};
  const Dense bonus = {0.0f, 0.0f, 1.0f};
  const Proposal half{0, {{0, 1}, {0.5f, 0.5f}}};
  for (uint64_t index = 0; index < 200; ++index) {
    EXPECT_THAT(RunRule({half}, Targets({p, bonus}), rejection, {1, index}).committed,
                ElementsAre(0, 2));
  }
  // p(d) = 0: always rejected. A point-mass proposal on token 2 leaves the residual p.
  int zero_correction = 0;
  for (uint64_t index = 0; index < 200; ++index) {
    const AcceptanceResult r = RunRule({Propose(2)}, Targets({p, bonus}), rejection, {1, index});
    EXPECT_EQ(r.num_accepted, 0);
    EXPECT_EQ(r.committed[0], ResampleAt(p, 1, index));
    zero_correction += r.committed[0] == 0;
  }
  EXPECT_GT(zero_correction, 0);
  // p = (0.5, 0.5), q = point mass on 0: accepted half the time; rejections always
  // emit token 1, the only token of max(0, p - q).
  const Dense even = {0.5f, 0.5f, 0.0f};
  int accepted = 0;
  for (uint64_t index = 0; index < 4000; ++index) {
    const AcceptanceResult r = RunRule({Propose(0)}, Targets({even, bonus}), rejection, {2, index});
    if (r.num_accepted == 1) {
      ++accepted;
      EXPECT_THAT(r.committed, ElementsAre(0, 2));
    } else {
      EXPECT_THAT(r.committed, ElementsAre(1));
    }
  }
  // Binomial(4000, 0.5): sd ~ 32; allow 6 sd.
  EXPECT_NEAR(accepted, 2000, 190);
}

TEST(RejectionRuleTest, EmptyResidualFallsBackToP) {
  // p sums to 0.99 (rounding upstream) and p <= q everywhere: the residual is all 0.
  const Dense p = {0.25f, 0.25f, 0.25f, 0.24f};
  const Dense bonus = {1.0f, 0.0f, 0.0f, 0.0f};
  const Proposal proposal{3, {{0, 1, 2, 3}, {0.25f, 0.25f, 0.25f, 0.25f}}};
  int rejections = 0;
  for (uint64_t index = 0; index < 2000 && rejections < 5; ++index) {
    // Accepted iff u < 0.24 / 0.25.
    if (UniformDouble(6, RandomStream::kAccept, index) < 0.24 / 0.25) continue;
    ++rejections;
    const AcceptanceResult r =
        RunRule({proposal}, Targets({p, bonus}), Rule(AcceptanceRule::kRejection), {6, index});
    EXPECT_EQ(r.num_accepted, 0);
    EXPECT_THAT(r.committed, ElementsAre(ResampleAt(p, 6, index)));
  }
  EXPECT_EQ(rejections, 5);
}

Dense RandomDistribution(std::mt19937* gen, int vocab, int zeros, float peak) {
  std::gamma_distribution<float> gamma(0.7f, 1.0f);
  Dense d(vocab);
  for (float& x : d) x = gamma(*gen);
  d[(*gen)() % vocab] += peak;
  for (int z = 0; z < zeros; ++z) d[(*gen)() % vocab] = 0.0f;
  double sum = 0.0;
  for (float x : d) sum += x;
  for (float& x : d) x = static_cast<float>(x / sum);
  return d;
}

// Losslessness: with the draft token drawn from q, the first committed token is
// distributed as p and the acceptance rate is sum_x min(p(x), q(x)).
TEST(RejectionRuleTest, FirstTokenIsDistributedAsTargetOverAMillionTrialsPerCase) {
  struct Case {
    int vocab;
    int p_zeros;
    int q_top_k;
    float q_peak;
    uint32_t seed;
  };
  const Case cases[] = {
      {6, 0, 6, 0.0f, 1},    // Full-support p and q.
      {8, 0, 3, 2.0f, 2},    // q on 3 tokens only: p's other tokens come from the residual.
      {10, 4, 10, 0.0f, 3},  // p has zeros that q proposes.
      {7, 1, 4, 5.0f, 4},    // Peaked q far from p.
  };
  constexpr int kTrials = 1000000;
  // Total variation of the empirical first-token distribution from p. Its sampling
  // error is ~sum_x sqrt(p(x)/N)/2 <= sqrt(V/N)/2 ~ 0.0016 for V = 10, N = 1e6.
  constexpr double kMaxTotalVariation = 0.005;
  // Acceptance rate: a mean of N Bernoulli draws, sd <= 0.0005; 6 sd.
  constexpr double kMaxAcceptanceError = 0.003;
  const AcceptanceParams rejection = Rule(AcceptanceRule::kRejection);
  for (const Case& c : cases) {
    std::mt19937 gen(c.seed);
    const Dense p = RandomDistribution(&gen, c.vocab, c.p_zeros, 0.0f);
    const SparseDistribution q =
        TopKSparse(RandomDistribution(&gen, c.vocab, 0, c.q_peak), c.q_top_k);
    const Dense bonus(c.vocab, 1.0f / c.vocab);
    const Targets targets({p, bonus});
    double expected_acceptance = 0.0;
    for (int x = 0; x < c.vocab; ++x)
      expected_acceptance += std::min<double>(p[x], ProbabilityOf(q, x));

    std::vector<int64_t> counts(c.vocab, 0);
    int64_t accepted = 0;
    std::vector<Proposal> proposals = {Proposal{0, q}};
    for (int t = 0; t < kTrials; ++t) {
      const uint64_t index = static_cast<uint64_t>(t) * 3;
      proposals[0].token =
          SampleFromSparse(q, UniformDouble(c.seed, RandomStream::kDraftSample, index));
      absl::StatusOr<AcceptanceResult> r =
          AcceptProposals(proposals, targets.spans, rejection, {c.seed, index});
      ASSERT_TRUE(r.ok()) << r.status();
      ++counts[r->committed[0]];
      accepted += r->num_accepted;
    }
    double total_variation = 0.0;
    for (int x = 0; x < c.vocab; ++x) {
      total_variation += std::fabs(static_cast<double>(counts[x]) / kTrials - p[x]);
      if (p[x] == 0.0f) {
        EXPECT_EQ(counts[x], 0) << "token " << x;
      }
    }
    total_variation /= 2;
    std::printf("rejection case vocab %d: total variation %.5f, acceptance %.5f (expected %.5f)\n",
                c.vocab, total_variation, static_cast<double>(accepted) / kTrials,
                expected_acceptance);
    EXPECT_LT(total_variation, kMaxTotalVariation) << "case vocab " << c.vocab;
    EXPECT_NEAR(static_cast<double>(accepted) / kTrials, expected_acceptance, kMaxAcceptanceError)
        << "case vocab " << c.vocab;
  }
}

// With K = 2 the second committed token (when the first proposal is accepted) is
// distributed as p_2, and a full acceptance's bonus as p_3.
TEST(RejectionRuleTest, LaterTokensAreDistributedAsTheirTargets) {
  std::mt19937 gen(17);
  const int vocab = 6;
  const Dense p1 = RandomDistribution(&gen, vocab, 0, 3.0f);
  const Dense p2 = RandomDistribution(&gen, vocab, 1, 0.0f);
  const Dense p3 = RandomDistribution(&gen, vocab, 0, 0.0f);
  const SparseDistribution q1 = TopKSparse(p1, vocab);  // q1 = p1: always accepted.
  const SparseDistribution q2 = TopKSparse(RandomDistribution(&gen, vocab, 0, 1.0f), 4);
  const Targets targets({p1, p2, p3});
  constexpr int kTrials = 1000000;
  std::vector<int64_t> second(vocab, 0), third(vocab, 0);
  int64_t with_second = 0, with_third = 0;
  std::vector<Proposal> proposals = {Proposal{0, q1}, Proposal{0, q2}};
  for (int t = 0; t < kTrials; ++t) {
    const uint64_t index = static_cast<uint64_t>(t) * 2;
    proposals[0].token = SampleFromSparse(q1, UniformDouble(99, RandomStream::kDraftSample, index));
    proposals[1].token =
        SampleFromSparse(q2, UniformDouble(99, RandomStream::kDraftSample, index + 1));
    absl::StatusOr<AcceptanceResult> r =
        AcceptProposals(proposals, targets.spans, Rule(AcceptanceRule::kRejection), {99, index});
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->committed.size() >= 2) {
      ++second[r->committed[1]];
      ++with_second;
    }
    if (r->committed.size() == 3) {
      ++third[r->committed[2]];
      ++with_third;
    }
  }
  ASSERT_EQ(with_second, kTrials);  // q1 == p1 up to float rounding: never rejected.
  double tv_second = 0.0, tv_third = 0.0;
  for (int x = 0; x < vocab; ++x) {
    tv_second += std::fabs(static_cast<double>(second[x]) / with_second - p2[x]) / 2;
    tv_third += std::fabs(static_cast<double>(third[x]) / with_third - p3[x]) / 2;
  }
  // Sampling error ~ sqrt(V/N)/2: 0.0012 for the second token (N = 1e6), and
  // ~0.002-0.003 for the bonus (N = number of full acceptances, checked below).
  ASSERT_GT(with_third, 200000);
  EXPECT_LT(tv_second, 0.005);
  EXPECT_LT(tv_third, 0.008);
}

// Every proposal of a step has its own acceptance draw: with q_1 != p_1 the first
// acceptance conditions nothing about the second. (If the proposals of a step shared
// one draw, u < r_1 would make u < r_2 likelier, tilting the second token towards q_2;
// that bias is below what the end-to-end test resolves, so it is checked here.) The
// second committed token, among the trials that accepted the first proposal, is
// distributed as p_2, for each value of the first token too.
TEST(RejectionRuleTest, SecondTokenDoesNotDependOnTheFirstAcceptance) {
  std::mt19937 gen(23);
  const int vocab = 5;
  const Dense p1 = RandomDistribution(&gen, vocab, 0, 0.0f);
  const Dense p2 = RandomDistribution(&gen, vocab, 0, 0.0f);
  const SparseDistribution q1 = TopKSparse(RandomDistribution(&gen, vocab, 0, 0.0f), vocab);
  const SparseDistribution q2 = TopKSparse(RandomDistribution(&gen, vocab, 0, 0.0f), vocab);
  const Targets targets({p1, p2, Dense(vocab, 1.0f / vocab)});
  constexpr int kTrials = 1000000;
  std::vector<std::vector<int64_t>> second(vocab, std::vector<int64_t>(vocab, 0));
  std::vector<Proposal> proposals = {Proposal{0, q1}, Proposal{0, q2}};
  for (int t = 0; t < kTrials; ++t) {
    const uint64_t index = static_cast<uint64_t>(t) * 2;
    proposals[0].token = SampleFromSparse(q1, UniformDouble(5, RandomStream::kDraftSample, index));
    proposals[1].token =
        SampleFromSparse(q2, UniformDouble(5, RandomStream::kDraftSample, index + 1));
    absl::StatusOr<AcceptanceResult> r =
        AcceptProposals(proposals, targets.spans, Rule(AcceptanceRule::kRejection), {5, index});
    ASSERT_TRUE(r.ok()) << r.status();
    if (r->num_accepted >= 1) ++second[r->committed[0]][r->committed[1]];
  }
  std::vector<int64_t> all(vocab, 0);
  int64_t total = 0;
  for (int first = 0; first < vocab; ++first) {
    int64_t n = 0;
    for (int x = 0; x < vocab; ++x) n += second[first][x], all[x] += second[first][x];
    total += n;
    if (n < 20000) continue;
    double tv = 0.0;
    for (int x = 0; x < vocab; ++x) tv += std::fabs(double(second[first][x]) / n - p2[x]) / 2;
    // Sampling error ~ sqrt(V / n) / 2 <= 0.008 at n = 20000.
    EXPECT_LT(tv, 0.02) << "first token " << first << ", " << n << " trials";
  }
  ASSERT_GT(total, 200000);
  double tv = 0.0;
  for (int x = 0; x < vocab; ++x) tv += std::fabs(double(all[x]) / total - p2[x]) / 2;
  EXPECT_LT(tv, 0.006) << total << " trials accepted the first proposal";
}

}  // namespace
}  // namespace spec
}  // namespace tandem
