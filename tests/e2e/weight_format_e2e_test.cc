// End to end with q8_0 and with q4_0 weights and an f16 KV cache: the bundled target
// and draft quantized by `tandem quantize`'s QuantizeModelDir, served with --kv_dtype=f16 by a
// draft worker, a one-process target (the bundled target's 688-wide down_proj does not
// split on 32-value blocks at tp 2) and tandem-coordinator. Greedy speculative output
// must stay token-identical to target-only output with the same weights and cache.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "model/quantize_model.h"
#include "tests/e2e/cluster.h"

namespace tandem::e2e {
namespace {

std::string Quantized(const std::string& model, const std::string& name, DType format) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string out = std::string(root != nullptr ? root : "/tmp") + "/" + name;
  auto report = QuantizeModelDir(model, out, format);
  EXPECT_TRUE(report.ok()) << report.status();
  return out;
}

// Target and draft in `format`, served with an f16 KV cache: greedy speculative output
// for K = 1, 4, 8 equals target-only output for six prompts.
void ExpectGreedyIdentity(DType format) {
  const std::string name = DTypeName(format);
  ClusterOptions options;
  options.tp = 1;
  options.tag = name;
  options.target_model = Quantized("models/target", "target_" + name, format);
  options.draft_model = Quantized("models/draft", "draft_" + name, format);
  options.worker_flags = {"--kv_dtype=f16"};
  auto cluster = Cluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto stub = (*cluster)->Client();
  const std::vector<std::string> prompts = TestPrompts(6);
  constexpr int kTokens = 24;
  int proposed = 0, accepted = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    auto baseline = Generate(stub.get(), prompts[p], kTokens, v1::SPECULATION_METHOD_NONE, -1);
    ASSERT_TRUE(baseline.ok()) << baseline.status() << (*cluster)->Logs();
    for (int k : {1, 4, 8}) {
      auto r = Generate(stub.get(), prompts[p], kTokens, v1::SPECULATION_METHOD_DRAFT, k);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(Ids(*r), Ids(*baseline)) << name << " prompt " << p << " K=" << k;
      proposed += r->stats().draft_tokens_proposed();
      accepted += r->stats().draft_tokens_accepted();
    }
  }
  EXPECT_GT(proposed, 0);
  std::printf("%s acceptance %.3f (%d/%d)\n", name.c_str(),
              proposed ? double(accepted) / proposed : 0.0, accepted, proposed);
}

TEST(WeightFormatE2eTest, GreedySpeculationWithQ8WeightsAndF16KvIsTokenIdenticalToTargetOnly) {
  ExpectGreedyIdentity(DType::kQ8_0);
}

TEST(WeightFormatE2eTest, GreedySpeculationWithQ4WeightsAndF16KvIsTokenIdenticalToTargetOnly) {
  ExpectGreedyIdentity(DType::kQ4_0);
}

}  // namespace
}  // namespace tandem::e2e
