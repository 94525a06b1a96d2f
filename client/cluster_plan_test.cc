#include "client/cluster_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::client {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

ClusterPorts Ports(int tp) {
  ClusterPorts p;
  p.coordinator = 5000;
  p.metrics = 5001;
  p.rendezvous = 5002;
  p.draft = 5003;
  for (int r = 0; r < tp; ++r) p.target.push_back(6000 + r);
  return p;
}

const ProcessSpec& Find(const ClusterPlan& plan, const std::string& name) {
  for (const auto& p : plan.processes) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no process " << name;
  return plan.processes.front();
}

TEST(PlanClusterTest, WiresEveryProcessTogether) {
  ClusterConfig c;
  c.tp = 2;
  c.coordinator.args = {"--optimistic=false"};
  auto plan = PlanCluster(c, Ports(2), "/bin/coord", "/bin/worker", "run-7", "/logs", {0, 1, 2, 3});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->processes.size(), 4u);
  EXPECT_EQ(plan->processes[0].name, "coordinator");
  EXPECT_EQ(plan->endpoint, "127.0.0.1:5000");
  EXPECT_EQ(plan->metrics_endpoint, "127.0.0.1:5001");

  const ProcessSpec& coord = Find(*plan, "coordinator");
  EXPECT_EQ(coord.binary, "/bin/coord");
  EXPECT_EQ(coord.log_path, "/logs/coordinator.log");
  EXPECT_EQ(coord.health_address, "127.0.0.1:5000");
  EXPECT_THAT(coord.args, Contains("--listen=127.0.0.1:5000"));
  EXPECT_THAT(coord.args, Contains("--target=127.0.0.1:6000"));
  EXPECT_THAT(coord.args, Contains("--draft=127.0.0.1:5003"));
  EXPECT_THAT(coord.args, Contains("--tokenizer=models/target"));
  EXPECT_THAT(coord.args, Contains("--rendezvous_listen=127.0.0.1:5002"));
  EXPECT_THAT(coord.args, Contains("--metrics_listen=127.0.0.1:5001"));
  EXPECT_EQ(coord.args.back(), "--optimistic=false");  // Extra args come last and win.
  EXPECT_TRUE(coord.cpus.empty());

  const ProcessSpec& rank1 = Find(*plan, "target-1");
  EXPECT_EQ(rank1.binary, "/bin/worker");
  EXPECT_THAT(rank1.args, Contains("--rank=1"));
  EXPECT_THAT(rank1.args, Contains("--tp_size=2"));
  EXPECT_THAT(rank1.args, Contains("--listen=127.0.0.1:6001"));
  EXPECT_THAT(rank1.args, Contains("--rendezvous=127.0.0.1:5002"));
  EXPECT_THAT(rank1.args, Contains("--run_id=run-7"));
  EXPECT_THAT(rank1.args, Contains("--hostname=127.0.0.1"));
  EXPECT_THAT(rank1.args, Contains("--threads=2"));  // 4 cores / 2 ranks.
  EXPECT_EQ(rank1.log_path, "/logs/target-1.log");
  // Stop order: coordinator, then draft and leader, then followers.
  EXPECT_EQ(coord.stop_stage, 0);
  EXPECT_EQ(Find(*plan, "target-0").stop_stage, 1);
  EXPECT_EQ(rank1.stop_stage, 2);

  const ProcessSpec& draft = Find(*plan, "draft");
  EXPECT_THAT(draft.args, Contains("--role=draft"));
  EXPECT_THAT(draft.args, Contains("--model_dir=models/draft"));
  EXPECT_THAT(draft.args, Contains("--threads=4"));
  EXPECT_EQ(draft.health_address, "127.0.0.1:5003");
  EXPECT_EQ(draft.stop_stage, 1);
}

TEST(PlanClusterTest, AffinityPinsDraftAndTargetToDisjointCores) {
  ClusterConfig c;
  c.tp = 4;
  c.cpu_affinity = true;
  auto plan = PlanCluster(c, Ports(4), "c", "w", "r", "/l", {0, 1});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Find(*plan, "draft").cpus, ElementsAre(0));
  EXPECT_THAT(Find(*plan, "draft").args, Contains("--threads=1"));
  for (int r = 0; r < 4; ++r) {
    const ProcessSpec& rank = Find(*plan, "target-" + std::to_string(r));
    EXPECT_THAT(rank.cpus, ElementsAre(1));
    EXPECT_THAT(rank.args, Contains("--threads=1"));
  }
  EXPECT_TRUE(Find(*plan, "coordinator").cpus.empty());
  EXPECT_THAT(CommandLineOf(Find(*plan, "draft")), HasSubstr("taskset -c 0 w --role=draft"));
}

TEST(PlanClusterTest, ExplicitCoreListsAndThreadsAreHonoured) {
  ClusterConfig c;
  c.tp = 2;
  c.cpu_affinity = true;
  c.draft_cpus = "4";
  c.target_cpus = "0-3";
  c.target.threads = 1;
  auto plan = PlanCluster(c, Ports(2), "c", "w", "r", "/l", {0});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(Find(*plan, "draft").cpus, ElementsAre(4));
  EXPECT_THAT(Find(*plan, "target-0").cpus, ElementsAre(0, 1));
  EXPECT_THAT(Find(*plan, "target-1").cpus, ElementsAre(2, 3));
  EXPECT_THAT(Find(*plan, "target-1").args, Contains("--threads=1"));
}

TEST(PlanClusterTest, NoDraftNoMetricsAndSingleRank) {
  ClusterConfig c;
  c.tp = 1;
  c.with_draft = false;
  ClusterPorts ports = Ports(1);
  ports.metrics = -1;
  auto plan = PlanCluster(c, ports, "c", "w", "r", "/l", {0, 1});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->processes.size(), 2u);
  EXPECT_EQ(plan->metrics_endpoint, "");
  const ProcessSpec& coord = Find(*plan, "coordinator");
  for (const auto& a : coord.args) {
    EXPECT_THAT(a, Not(HasSubstr("--draft="))) << a;
    EXPECT_THAT(a, Not(HasSubstr("--metrics_listen"))) << a;
  }
  EXPECT_THAT(Find(*plan, "target-0").args, Contains("--comm=local"));
}

TEST(PlanClusterTest, RejectsUnresolvedPortsAndImpossibleAffinity) {
  ClusterConfig c;
  c.tp = 2;
  ClusterPorts ports = Ports(2);
  ports.coordinator = 0;
  EXPECT_FALSE(PlanCluster(c, ports, "c", "w", "r", "/l", {0, 1}).ok());
  EXPECT_FALSE(PlanCluster(c, Ports(3), "c", "w", "r", "/l", {0, 1}).ok());
  c.cpu_affinity = true;
  auto one_core = PlanCluster(c, Ports(2), "c", "w", "r", "/l", {0});
  ASSERT_FALSE(one_core.ok());
  EXPECT_THAT(std::string(one_core.status().message()), HasSubstr("2 cores"));
}

TEST(CommandLineOfTest, QuotesWhatTheShellWouldSplit) {
  ProcessSpec p;
  p.binary = "/bin/x";
  p.args = {"--a=b c", "it's", "plain"};
  EXPECT_EQ(CommandLineOf(p), "/bin/x '--a=b c' 'it'\\''s' plain");
}

}  // namespace
}  // namespace tandem::client
