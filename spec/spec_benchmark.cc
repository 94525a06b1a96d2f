// Prints the CPU time of the per-position speculation math at realistic vocabulary
// sizes: ProcessLogits (temperature, top-k, top-p), TopKSparse, GumbelSample (the
// coupled rule's per-position draw), and AcceptProposals for a K = 8 step. Usage: bazel run
// //spec:spec_benchmark
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "spec/acceptance.h"
#include "spec/rng.h"
#include "spec/sampling.h"

namespace tandem {
namespace spec {
namespace {

// Mean time per call over `calls` calls, the best of 5 rounds (robust to a busy host).
template <typename Fn>
double MicrosPerCall(int calls, Fn fn) {
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn(i);
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    const double per_call = elapsed.count() / calls;
    if (round == 0 || per_call < best) best = per_call;
  }
  return best;
}

void Run(int vocab) {
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(gen);
  std::vector<float> probs;
  const SamplingConfig configs[] = {
      {0.0f, 0, 1.0f}, {1.0f, 0, 1.0f}, {0.8f, 0, 0.9f}, {1.0f, 50, 0.95f}};
  const char* names[] = {"greedy", "T=1", "T=0.8 top_p=0.9", "T=1 top_k=50 top_p=0.95"};
  for (int c = 0; c < 4; ++c) {
    const double us = MicrosPerCall(20, [&](int) { ProcessLogits(logits, configs[c], &probs); });
    std::printf("vocab %6d  ProcessLogits %-24s %8.1f us\n", vocab, names[c], us);
  }
  ProcessLogits(logits, {1.0f, 0, 1.0f}, &probs);
  std::printf("vocab %6d  TopKSparse k=32                        %8.1f us\n", vocab,
              MicrosPerCall(20, [&](int) { TopKSparse(probs, 32); }));
  std::printf("vocab %6d  GumbelSample (full support)            %8.1f us\n", vocab,
              MicrosPerCall(20, [&](int i) { GumbelSample(probs, 7, i); }));

  constexpr int kK = 8;
  std::vector<std::vector<float>> targets(kK + 1);
  std::vector<absl::Span<const float>> spans;
  std::vector<Proposal> proposals;
  for (int i = 0; i <= kK; ++i) {
    for (float& x : logits) x = normal(gen);
    ProcessLogits(logits, {1.0f, 0, 1.0f}, &targets[i]);
    spans.push_back(targets[i]);
    if (i < kK) {
      const SparseDistribution q = TopKSparse(targets[i], 32);
      proposals.push_back({q.ids[0], q});
    }
  }
  for (AcceptanceRule rule :
       {AcceptanceRule::kRejection, AcceptanceRule::kTypical, AcceptanceRule::kCoupled}) {
    AcceptanceParams params;
    params.rule = rule;
    const double us = MicrosPerCall(50, [&](int i) {
      const uint64_t n = static_cast<uint64_t>(i) * 16;
      (void)AcceptProposals(proposals, spans, params, {7, n, n});
    });
    std::printf("vocab %6d  AcceptProposals K=8 %-19s %8.1f us\n", vocab,
                std::string(AcceptanceRuleName(rule)).c_str(), us);
  }
}

}  // namespace
}  // namespace spec
}  // namespace tandem

int main() {
  for (int vocab : {32000, 128256}) tandem::spec::Run(vocab);
  return 0;
}
