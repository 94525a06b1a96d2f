// Lossless sampling end to end: the `rejection` rule against target-only sampling
// (method none) on the same server.
//
// SpeculativeSamplingMatchesTargetSampling: temperature 1, the first two generated
// tokens (K = 1, the cap of max_new_tokens = 2), two-sample chi-square over (t1, t2),
// N = 1500 requests per method; a lossy rule (threshold 0.05, N = 500) must fail it.
//
// SpeculativeWindowsMatchTargetSampling: temperature 0.6 and top-p 0.95, generated
// positions 1..4 with K = 1..8 (K = 1 + i % 8 for request i, max_new_tokens = 9 so
// that K = 8 is not capped by the tokens left), under load (24 requests in flight, so
// drafts and verifies are ragged batches of mixed K) and with the speculation cache
// (pipelining on; the server runs lockstep pre-drafting 4 outcomes per sequence at any
// batch size: --optimistic_max_batch=64, --pipeline_mode=lockstep,
// --predraft_branches=4), whose use the test asserts (RequestStats.predrafted_steps). The
// target-only requests return log p of each token, so every window (t1..tj) they produce comes with
// its exact probability under the target, exp(sum of log p). The speculative windows are tested
// against those exact probabilities (GoodnessOfFit for j = 2, 3, 4: the joint of the prefix window,
// which covers every conditional up to position j), and their marginals at positions 2, 3, 4
// against the target-only marginals (TwoSample): six tests at a family-wise significance of 0.001
// (Bonferroni). It prints the shift of probability mass between the two likeliest windows that the
// j = 4 test detects with 90% power (DetectableShift), and a lossy rule (threshold 0.05, N = 300)
// must fail. Measured (2026-12-01, 2 loaded cores, ~40 s for both tests): the likeliest windows
// have p = 0.433 and 0.079, and moving 0.036 of probability between them is detected
// with 90% power at N = 3000 (a smaller bias spread over several windows needs
// more). The lossy controls are far past their critical values, so they run fewer
// requests (CI time): at N = 1000 the threshold rule gave chi2 = 761 against a
// critical 41.5 (noncentrality ~750, linear in N: ~225 at N = 300), and in the first
// test chi2 = 423 against 90.7 at 1500 + 1500 requests (two-sample noncentrality
// ~370, proportional to n1 n2 / (n1 + n2): ~185 with 1500 + 500); measured at the
// reduced sizes: chi2 = 153 against 31.0 (N = 300) and 194 against 73.5 (1500 + 500).
// Outputs are a function of the seeds, so a given build always gives these figures.
//
// MedusaTreeWindowsMatchTargetSampling: the same windows from Medusa trees (8 nodes,
// rejection rule, N = 2000) against the same exact probabilities, and the typical rule
// (lossy) as the positive control (N = 300).
//
// LookaheadWindowsMatchTargetSampling: the windows (positions 1..4, same sampling) of a
// prompt whose own n-grams recur ("import numpy as np\nimport") from Lookahead (W = 2,
// N = 3, G = 2, the server defaults: guesses of 2 tokens from the n-gram pool, verified
// as a trie of point masses) under the rejection rule, N = 1500, against the exact
// probabilities of the windows that 1000 target-only requests found (alpha = 0.001);
// the requests generate the window only (max_new_tokens = 4), so every accepted guess
// lies in it, and the test asserts that guesses were accepted (measured 2026-12-03:
// 1126 and 1132 in 1500 requests in two runs, chi2 = 41.5 and 39.6 against a critical
// 62.6 at df = 32, about 6 s).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <mutex>
#include <thread>

#include "tests/e2e/cluster.h"
#include "tests/e2e/sample_stats.h"

namespace tandem::e2e {
namespace {

constexpr double kAlpha = 0.001;

// SpeculativeWindowsMatchTargetSampling: a prompt and sampling whose first four
// tokens fall on few windows, so a few thousand requests suffice.
constexpr char kWindowPrompt[] = "    def __init__(self";
constexpr float kWindowTemperature = 0.6f;
constexpr float kWindowTopP = 0.95f;
constexpr int kWindowThreads = 24;
constexpr int kWindowTargetSamples = 3000;
constexpr int kWindowSamples = 3000;
constexpr int kWindowLossySamples = 300;
constexpr int kMedusaSamples = 2000;
// LookaheadWindowsMatchTargetSampling: a prompt whose n-grams recur in its continuation.
constexpr char kLookaheadPrompt[] = "import numpy as np\nimport";
constexpr int kLookaheadTargetSamples = 1000;  // Finds the windows; log p gives their p.
constexpr int kLookaheadSamples = 1500;

struct Arm {
  v1::SpeculationMethod method = v1::SPECULATION_METHOD_NONE;
  int max_new_tokens = 2;
  int window = 2;                                     // Tokens per outcome.
  std::function<int(int)> k = [](int) { return 0; };  // K of request i; 0 = none.
  v1::AcceptanceRule rule = v1::ACCEPTANCE_RULE_DEFAULT;
  float alpha = 0;
  bool logprobs = false;
  float temperature = 1.0f;
  float top_p = 0;  // 0 = unset.
  int threads = 48;
  int lookahead_window = 0;  // W, N, G of a Lookahead request (0 = unset).
  int lookahead_ngram = 0;
  int lookahead_guesses = 0;
};

struct Samples {
  Counts windows;
  Probabilities exact;  // Window -> exp(sum of log p), when logprobs were asked.
  int mismatched = 0;   // Windows whose log p differed between two requests.
  int predrafted = 0;   // Steps whose candidates came from the speculation cache.
  int accepted = 0;     // Proposals accepted (RequestStats).
};

class SamplingE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.tp = 2;
    options.tag = "sampling";
    options.coordinator_flags = {"--max_running=64", "--max_queue=256", "--optimistic_max_batch=64",
                                 "--pipeline_mode=lockstep", "--predraft_branches=4"};
    auto cluster = Cluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr) << "the cluster did not start"; }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  // `n` requests of `arm` with seeds seed_base + i.
  static Samples Sample(const std::string& prompt, const Arm& arm, int n, uint64_t seed_base) {
    auto stub = cluster_->Client();
    Samples out;
    std::mutex mu;
    std::atomic<int> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < arm.threads; ++t) {
      pool.emplace_back([&] {
        for (int i = next++; i < n; i = next++) {
          v1::GenerateRequest req;
          req.set_text(prompt);
          req.set_max_new_tokens(arm.max_new_tokens);
          req.set_ignore_eos(true);
          req.set_return_token_ids(true);
          req.set_return_logprobs(arm.logprobs);
          req.mutable_sampling()->set_temperature(arm.temperature);
          if (arm.top_p > 0) req.mutable_sampling()->set_top_p(arm.top_p);
          req.mutable_sampling()->set_seed(seed_base + i);
          v1::SpeculationParams* spec = req.mutable_speculation();
          spec->set_method(arm.method);
          if (arm.k(i) > 0) spec->set_num_speculative_tokens(arm.k(i));
          spec->set_acceptance_rule(arm.rule);
          if (arm.alpha > 0) spec->set_alpha(arm.alpha);
          if (arm.method != v1::SPECULATION_METHOD_NONE) spec->set_pipelining(v1::PIPELINING_ON);
          if (arm.lookahead_window > 0) {
            spec->mutable_lookahead()->set_window(arm.lookahead_window);
            spec->mutable_lookahead()->set_ngram(arm.lookahead_ngram);
            spec->mutable_lookahead()->set_max_guesses(arm.lookahead_guesses);
          }
          grpc::ClientContext ctx;
          v1::GenerateResponse resp;
          grpc::Status st = stub->Generate(&ctx, req, &resp);
          ASSERT_TRUE(st.ok()) << st.error_message();
          ASSERT_GE(resp.token_ids_size(), arm.window);
          Outcome w(resp.token_ids().begin(), resp.token_ids().begin() + arm.window);
          std::lock_guard<std::mutex> lock(mu);
          out.windows[w] += 1;
          out.predrafted += resp.stats().predrafted_steps();
          out.accepted += static_cast<int>(resp.stats().draft_tokens_accepted());
          if (!arm.logprobs) continue;
          ASSERT_EQ(resp.logprobs_size(), resp.token_ids_size());
          double logp = 0;
          for (int j = 0; j < arm.window; ++j) {
            logp += resp.logprobs(j);
            Outcome prefix(w.begin(), w.begin() + j + 1);
            auto [it, fresh] = out.exact.emplace(prefix, std::exp(logp));
            if (!fresh && std::abs(it->second - std::exp(logp)) > 1e-4 * it->second) {
              out.mismatched += 1;
            }
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    return out;
  }

  // The target-only windows of kWindowPrompt (WindowTargetArm), sampled once for the
  // tests that compare against them.
  static const Samples& WindowReference();

  static Cluster* cluster_;
};

Cluster* SamplingE2eTest::cluster_ = nullptr;

// Prefix windows (t1..tj) of `windows`.
Counts Prefixes(const Counts& windows, int j) {
  Counts prefixes;
  for (const auto& [w, count] : windows) prefixes[Outcome(w.begin(), w.begin() + j)] += count;
  return prefixes;
}

// Windows of length j of an exact table that holds prefixes of every length.
Probabilities OfLength(const Probabilities& exact, int j) {
  Probabilities out;
  for (const auto& [w, p] : exact) {
    if (static_cast<int>(w.size()) == j) out[w] = p;
  }
  return out;
}

TEST_F(SamplingE2eTest, SpeculativeSamplingMatchesTargetSampling) {
  const std::string prompt = "import os\nimport sys\n\ndef main(argv):\n    ";
  constexpr int kSamples = 1500;
  constexpr int kLossySamples = 500;
  const Arm target_only;
  Arm speculative;
  speculative.method = v1::SPECULATION_METHOD_DRAFT;
  speculative.k = [](int) { return 4; };
  // Explicit: seeded requests default to `coupled` (its identity with target-only
  // sampling is coupled_identity_e2e_test's).
  speculative.rule = v1::ACCEPTANCE_RULE_REJECTION;
  const Counts a = Sample(prompt, target_only, kSamples, 1000000).windows;
  const ChiSquareTest rejection =
      TwoSample(a, Sample(prompt, speculative, kSamples, 2000000).windows, kAlpha);
  std::printf("K = 1, rejection rule: %s\n", rejection.ToString().c_str());
  EXPECT_GE(rejection.df, 2) << "the prompt's distribution is too peaked to test";
  EXPECT_FALSE(rejection.rejected()) << rejection.ToString();

  // The same test does see a lossy rule: threshold 0.05 accepts most draft tokens, so
  // the output leans towards the draft's distribution.
  Arm lossy = speculative;
  lossy.rule = v1::ACCEPTANCE_RULE_THRESHOLD;
  lossy.alpha = 0.05f;
  const ChiSquareTest threshold =
      TwoSample(a, Sample(prompt, lossy, kLossySamples, 3000000).windows, kAlpha);
  std::printf("K = 1, threshold rule: %s\n", threshold.ToString().c_str());
  EXPECT_TRUE(threshold.rejected()) << threshold.ToString();
}

constexpr int kWindow = 4;

// Target-only sampling of kWindowPrompt's first kWindow tokens, with log p.
Arm WindowTargetArm() {
  Arm target_only;
  target_only.max_new_tokens = kWindow;
  target_only.window = kWindow;
  target_only.logprobs = true;
  target_only.temperature = kWindowTemperature;
  target_only.top_p = kWindowTopP;
  target_only.threads = kWindowThreads;
  return target_only;
}

const Samples& SamplingE2eTest::WindowReference() {
  static const Samples* reference =
      new Samples(Sample(kWindowPrompt, WindowTargetArm(), kWindowTargetSamples, 4000000));
  return *reference;
}

TEST_F(SamplingE2eTest, SpeculativeWindowsMatchTargetSampling) {
  const std::string prompt = kWindowPrompt;
  const Arm target_only = WindowTargetArm();
  Arm speculative = target_only;
  speculative.method = v1::SPECULATION_METHOD_DRAFT;
  speculative.max_new_tokens = 9;  // K = 8 is not capped by the tokens left.
  speculative.k = [](int i) { return 1 + i % 8; };
  speculative.rule = v1::ACCEPTANCE_RULE_REJECTION;

  const Samples& reference = WindowReference();
  const Samples spec = Sample(prompt, speculative, kWindowSamples, 5000000);
  // log p of a window is the target's, whichever method produced it.
  EXPECT_EQ(reference.mismatched, 0);
  EXPECT_EQ(spec.mismatched, 0);
  int mismatched = 0;
  for (const auto& [w, p] : spec.exact) {
    const auto it = reference.exact.find(w);
    mismatched += it != reference.exact.end() && std::abs(it->second - p) > 1e-4 * p;
  }
  EXPECT_EQ(mismatched, 0) << "log p differs between method none and draft";
  // The speculation cache is really used (4 outcomes pre-drafted per sequence).
  std::printf("%d speculative steps took pre-drafted candidates\n", spec.predrafted);
  EXPECT_GT(spec.predrafted, kWindowSamples / 20);

  const double alpha = kAlpha / 6;  // Bonferroni over the six tests.
  std::vector<double> likeliest;
  for (int j = 2; j <= kWindow; ++j) {
    const ChiSquareTest joint =
        GoodnessOfFit(Prefixes(spec.windows, j), OfLength(reference.exact, j), alpha);
    const ChiSquareTest marginal =
        TwoSample(Marginal(reference.windows, j - 1), Marginal(spec.windows, j - 1), alpha);
    std::printf("positions 1..%d joint vs exact: %s; position %d marginal: %s\n", j,
                joint.ToString().c_str(), j, marginal.ToString().c_str());
    EXPECT_GE(joint.df, 4) << "too few windows to test at j = " << j;
    EXPECT_FALSE(joint.rejected()) << "j = " << j << ": " << joint.ToString();
    EXPECT_FALSE(marginal.rejected()) << "position " << j << ": " << marginal.ToString();
    if (j == kWindow) {
      for (const auto& [w, p] : OfLength(reference.exact, j)) likeliest.push_back(p);
      std::sort(likeliest.rbegin(), likeliest.rend());
      ASSERT_GE(likeliest.size(), 2u);
      std::printf(
          "j = %d detects with 90%% power a shift of %.4f between windows of p = %.3f "
          "and %.3f (N = %d)\n",
          j, DetectableShift(kWindowSamples, joint.df, alpha, likeliest[0], likeliest[1]),
          likeliest[0], likeliest[1], kWindowSamples);
    }
  }

  // The same test sees a lossy rule at these positions.
  Arm lossy = speculative;
  lossy.rule = v1::ACCEPTANCE_RULE_THRESHOLD;
  lossy.alpha = 0.05f;
  const Samples biased = Sample(prompt, lossy, kWindowLossySamples, 6000000);
  const ChiSquareTest lossy_joint =
      GoodnessOfFit(biased.windows, OfLength(reference.exact, kWindow), alpha);
  std::printf("threshold rule, positions 1..%d: %s\n", kWindow, lossy_joint.ToString().c_str());
  EXPECT_TRUE(lossy_joint.rejected()) << lossy_joint.ToString();
}

// Medusa trees (8 nodes from the target leader's heads, point-mass siblings) under the
// lossless tree rejection rule: the windows keep the target's distribution; the typical
// rule (Medusa's lossy default, epsilon 0.09, delta 0.3) is caught by the same test.
TEST_F(SamplingE2eTest, MedusaTreeWindowsMatchTargetSampling) {
  Arm medusa = WindowTargetArm();
  medusa.method = v1::SPECULATION_METHOD_MEDUSA;
  medusa.max_new_tokens = 9;  // Steps 2.. verify trees of depth up to 4.
  medusa.k = [](int) { return 8; };
  medusa.rule = v1::ACCEPTANCE_RULE_REJECTION;
  const Samples& reference = WindowReference();
  const Samples spec = Sample(kWindowPrompt, medusa, kMedusaSamples, 7000000);
  EXPECT_EQ(spec.mismatched, 0);
  const double alpha = kAlpha / 2;  // Bonferroni over the two tests.
  const ChiSquareTest joint =
      GoodnessOfFit(spec.windows, OfLength(reference.exact, kWindow), alpha);
  std::printf("medusa, rejection, positions 1..%d: %s\n", kWindow, joint.ToString().c_str());
  EXPECT_GE(joint.df, 4);
  EXPECT_FALSE(joint.rejected()) << joint.ToString();

  Arm typical = medusa;
  typical.rule = v1::ACCEPTANCE_RULE_TYPICAL;
  const Samples biased = Sample(kWindowPrompt, typical, kWindowLossySamples, 8000000);
  const ChiSquareTest lossy =
      GoodnessOfFit(biased.windows, OfLength(reference.exact, kWindow), alpha);
  std::printf("medusa, typical, positions 1..%d: %s\n", kWindow, lossy.ToString().c_str());
  EXPECT_TRUE(lossy.rejected()) << lossy.ToString();
}

// Lookahead (rejection rule on the trie of pool guesses; the window is computed only)
// keeps the target's distribution of the first four tokens. The prompt's own n-grams
// predict some of them, so guesses are accepted (asserted: the test can fail).
TEST_F(SamplingE2eTest, LookaheadWindowsMatchTargetSampling) {
  const std::string prompt = kLookaheadPrompt;
  const Samples reference = Sample(prompt, WindowTargetArm(), kLookaheadTargetSamples, 9000000);
  Arm lookahead = WindowTargetArm();
  lookahead.method = v1::SPECULATION_METHOD_LOOKAHEAD;
  lookahead.k = [](int) { return 8; };  // Fixed K: every step verifies its guesses.
  lookahead.rule = v1::ACCEPTANCE_RULE_REJECTION;
  lookahead.lookahead_window = 2;
  lookahead.lookahead_ngram = 3;
  lookahead.lookahead_guesses = 2;
  const Samples spec = Sample(prompt, lookahead, kLookaheadSamples, 10000000);
  EXPECT_EQ(reference.mismatched, 0);
  EXPECT_EQ(spec.mismatched, 0);
  std::printf("lookahead: %d guess tokens accepted in %d requests\n", spec.accepted,
              kLookaheadSamples);
  EXPECT_GT(spec.accepted, kLookaheadSamples / 5) << "too few accepted guesses to test";
  const ChiSquareTest joint =
      GoodnessOfFit(spec.windows, OfLength(reference.exact, kWindow), kAlpha);
  std::printf("lookahead, rejection, positions 1..%d: %s\n", kWindow, joint.ToString().c_str());
  EXPECT_GE(joint.df, 4);
  EXPECT_FALSE(joint.rejected()) << joint.ToString();
}

}  // namespace
}  // namespace tandem::e2e
