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
#include "spec/acceptance_test_util.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace {

using testing::Dense;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Propose;
using testing::ResampleAt;
using testing::Rule;
using testing::RunRule;
using testing::RunStatus;
using testing::Targets;
using testing::WithMassAt;

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

}  // namespace
}  // namespace spec
}  // namespace tandem
