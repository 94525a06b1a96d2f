// Medusa end to end (real processes, bundled target with its heads, no draft worker):
// the target leader computes the heads on the all-reduced hidden row of a 2-rank group
// (tp > 1: the heads see what every rank holds), returns each step's tree with the
// verify result, and greedy output is token-identical to target-only decoding for 20
// prompts x tree sizes (1, 4, 8, 16 nodes and the server default) x pipelining on and
// off. tp agreement: at a fixed tree size of 4 a 1-rank target accepts exactly as many
// proposals per prompt as the 2-rank group (same trees, same verdicts; adaptive sizes
// depend on what concurrent requests taught the controller, so they are not compared). GetModelInfo
// lists MEDUSA; a target started with --medusa=false does not serve it (FAILED_PRECONDITION naming
// what is missing).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "tests/e2e/cluster.h"

namespace tandem::e2e {
namespace {

constexpr int kTokens = 24;
constexpr int kPrompts = 20;

// Accepted proposals per prompt at the default tree size (pipelining on) on the 2-rank
// group, for the tp agreement test (empty until GreedyMedusaTrees... ran).
std::vector<int>& Tp2Accepted() {
  static std::vector<int> accepted;
  return accepted;
}

v1::ModelInfo Info(v1::Tandem::Stub* stub) {
  grpc::ClientContext ctx;
  v1::ModelInfo info;
  EXPECT_TRUE(stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  return info;
}

bool Lists(const v1::ModelInfo& info, v1::SpeculationMethod method) {
  return std::find(info.methods().begin(), info.methods().end(), method) != info.methods().end();
}

// A target of `tp` ranks with the bundled heads and no draft worker. Fixed cost terms and
// no batch limit: the controller's choices depend on acceptance alone, not on this
// machine's timing or load, so both layouts make the same ones (what is tested is
// decoding).
ClusterOptions MedusaCluster(int tp, const std::string& tag) {
  ClusterOptions options;
  options.tp = tp;
  options.with_draft = false;
  options.tag = tag;
  options.coordinator_flags = {"--max_running=64", "--max_k=16", "--measured_costs=false",
                               "--speculation_max_batch=64"};
  return options;
}

TEST(MedusaE2eTest, GreedyMedusaTreesAreTokenIdenticalToTargetOnly) {
  auto cluster = Cluster::Start(MedusaCluster(2, "medusa"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto stub = (*cluster)->Client();
  EXPECT_TRUE(Lists(Info(stub.get()), v1::SPECULATION_METHOD_MEDUSA));

  const std::vector<std::string> prompts = TestPrompts(kPrompts);
  Tp2Accepted().assign(kPrompts, -1);
  std::vector<std::vector<int>> baseline(prompts.size());
  ParallelFor(prompts.size(), 20, [&](int i) {
    auto r = Generate(stub.get(), prompts[i], kTokens, v1::SPECULATION_METHOD_NONE, -1);
    ASSERT_TRUE(r.ok()) << r.status() << (*cluster)->Logs();
    baseline[i] = Ids(*r);
  });
  const std::vector<int> sizes = {1, 4, 8, 16, -1};  // -1: the default (--medusa_nodes).
  // Separate waves: PIPELINING_OFF makes the whole running batch sequential.
  for (v1::Pipelining mode : {v1::PIPELINING_ON, v1::PIPELINING_OFF}) {
    std::atomic<int> proposed{0}, accepted{0};
    const int n = static_cast<int>(prompts.size() * sizes.size());
    ParallelFor(n, 32, [&](int j) {
      const int i = j % prompts.size(), k = sizes[j / prompts.size()];
      auto r = Generate(stub.get(), prompts[i], kTokens, v1::SPECULATION_METHOD_MEDUSA, k, mode);
      ASSERT_TRUE(r.ok()) << r.status() << (*cluster)->Logs();
      EXPECT_EQ(Ids(*r), baseline[i]) << "prompt " << i << " nodes " << k << " pipelining " << mode;
      EXPECT_EQ(r->stats().method(), v1::SPECULATION_METHOD_MEDUSA);
      if (k == 4 && mode == v1::PIPELINING_ON) {
        Tp2Accepted()[i] = static_cast<int>(r->stats().draft_tokens_accepted());
      }
      proposed += r->stats().draft_tokens_proposed();
      accepted += r->stats().draft_tokens_accepted();
    });
    EXPECT_GT(accepted.load(), 0);
    std::printf("medusa, pipelining=%d: accepted %d of depth %d\n", mode, accepted.load(),
                proposed.load());
  }
}

TEST(MedusaE2eTest, OneRankAcceptsWhatTwoRanksAccept) {
  ASSERT_EQ(Tp2Accepted().size(), static_cast<size_t>(kPrompts)) << "runs after the tp 2 test";
  auto cluster = Cluster::Start(MedusaCluster(1, "medusa_tp1"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto stub = (*cluster)->Client();
  const std::vector<std::string> prompts = TestPrompts(kPrompts);
  ParallelFor(kPrompts, 20, [&](int i) {
    auto r = Generate(stub.get(), prompts[i], kTokens, v1::SPECULATION_METHOD_MEDUSA, 4,
                      v1::PIPELINING_ON);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(static_cast<int>(r->stats().draft_tokens_accepted()), Tp2Accepted()[i])
        << "prompt " << i;
  });
}

TEST(MedusaE2eTest, WithoutHeadsMedusaIsNotServed) {
  ClusterOptions options;
  options.tp = 1;
  options.with_draft = false;
  options.tag = "no_medusa";
  options.worker_flags = {"--medusa=false"};
  auto cluster = Cluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto stub = (*cluster)->Client();
  EXPECT_FALSE(Lists(Info(stub.get()), v1::SPECULATION_METHOD_MEDUSA));
  auto r = Generate(stub.get(), "def f(x):\n", 4, v1::SPECULATION_METHOD_MEDUSA, -1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("medusa_lm_head.safetensors"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace tandem::e2e
