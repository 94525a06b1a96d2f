// Lossless sampling end to end: with temperature 1 and the rejection rule, the first
// two generated tokens of speculative decoding have the same distribution as
// target-only sampling. Two-sample chi-square test over (t1, t2) outcomes, N = 1500
// requests per method, independent seeds, significance 0.001.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "tests/e2e/cluster.h"

namespace tandem::e2e {
namespace {

constexpr int kSamples = 1500;

// Upper 0.001 quantile of chi-square with `df` degrees of freedom (Wilson-Hilferty).
double ChiSquareCritical(int df) {
  const double z = 3.090;  // Standard normal 0.999 quantile.
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1 - a + z * std::sqrt(a), 3);
}

using Counts = std::map<std::pair<int, int>, int>;

Counts SamplePairs(v1::Tandem::Stub* stub, const std::string& prompt, v1::SpeculationMethod method,
                   int k, uint64_t seed_base, v1::AcceptanceRule rule = v1::ACCEPTANCE_RULE_DEFAULT,
                   float alpha = 0) {
  std::map<std::pair<int, int>, int> counts;
  std::mutex mu;
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 48; ++t) {
    pool.emplace_back([&] {
      for (int i = next++; i < kSamples; i = next++) {
        v1::GenerateRequest req;
        req.set_text(prompt);
        req.set_max_new_tokens(2);
        req.set_ignore_eos(true);
        req.set_return_token_ids(true);
        req.mutable_sampling()->set_temperature(1.0f);
        req.mutable_sampling()->set_seed(seed_base + i);
        req.mutable_speculation()->set_method(method);
        if (k > 0) req.mutable_speculation()->set_num_speculative_tokens(k);
        req.mutable_speculation()->set_acceptance_rule(rule);
        if (alpha > 0) req.mutable_speculation()->set_alpha(alpha);
        grpc::ClientContext ctx;
        v1::GenerateResponse resp;
        grpc::Status st = stub->Generate(&ctx, req, &resp);
        ASSERT_TRUE(st.ok()) << st.error_message();
        ASSERT_EQ(resp.token_ids_size(), 2);
        std::lock_guard<std::mutex> lock(mu);
        counts[{resp.token_ids(0), resp.token_ids(1)}] += 1;
      }
    });
  }
  for (auto& th : pool) th.join();
  return counts;
}

// Two-sample chi-square statistic of equal-size samples over their outcomes, pooling
// outcomes seen fewer than 10 times in total; returns {chi2, degrees of freedom}.
std::pair<double, int> TwoSampleChiSquare(const Counts& a, const Counts& b) {
  std::map<std::pair<int, int>, std::pair<double, double>> table;
  for (auto& [k, v] : a) table[k].first += v;
  for (auto& [k, v] : b) table[k].second += v;
  std::vector<std::pair<double, double>> cells;
  std::pair<double, double> rest{0, 0};
  for (auto& [k, v] : table) {
    if (v.first + v.second >= 10) {
      cells.push_back(v);
    } else {
      rest.first += v.first;
      rest.second += v.second;
    }
  }
  if (rest.first + rest.second > 0) cells.push_back(rest);
  double chi2 = 0;
  for (auto& [x, y] : cells) chi2 += (x - y) * (x - y) / (x + y);
  EXPECT_GE(cells.size(), 3u) << "the prompt's distribution is too peaked to test";
  return {chi2, static_cast<int>(cells.size()) - 1};
}

TEST(SamplingE2eTest, SpeculativeSamplingMatchesTargetSampling) {
  ClusterOptions options;
  options.tp = 2;
  options.tag = "sampling";
  options.coordinator_flags = {"--max_running=64", "--max_queue=256"};
  auto cluster = Cluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto stub = (*cluster)->Client();
  const std::string prompt = "import os\nimport sys\n\ndef main(argv):\n    ";

  const Counts target_only =
      SamplePairs(stub.get(), prompt, v1::SPECULATION_METHOD_NONE, 0, 1000000);
  const Counts speculative =
      SamplePairs(stub.get(), prompt, v1::SPECULATION_METHOD_DRAFT, 4, 2000000);
  const auto [chi2, df] = TwoSampleChiSquare(target_only, speculative);
  std::printf("rejection rule: chi2 = %.1f, df = %d, critical(0.001) = %.1f\n", chi2, df,
              ChiSquareCritical(df));
  EXPECT_LT(chi2, ChiSquareCritical(df));

  // The same test does see a lossy rule: threshold 0.05 accepts most draft tokens, so
  // the output leans towards the draft's distribution.
  const Counts lossy = SamplePairs(stub.get(), prompt, v1::SPECULATION_METHOD_DRAFT, 4, 3000000,
                                   v1::ACCEPTANCE_RULE_THRESHOLD, 0.05f);
  const auto [lossy_chi2, lossy_df] = TwoSampleChiSquare(target_only, lossy);
  std::printf("threshold rule: chi2 = %.1f, df = %d, critical(0.001) = %.1f\n", lossy_chi2,
              lossy_df, ChiSquareCritical(lossy_df));
  EXPECT_GT(lossy_chi2, ChiSquareCritical(lossy_df));
}

}  // namespace
}  // namespace tandem::e2e
