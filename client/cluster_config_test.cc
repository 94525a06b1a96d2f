#include "client/cluster_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace tandem::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(ClusterConfigTest, EmptyObjectGivesDefaults) {
  auto c = ParseClusterConfig("{}");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->target.model, "models/target");
  EXPECT_EQ(c->draft.model, "models/draft");
  EXPECT_EQ(c->tp, 4);
  EXPECT_TRUE(c->with_draft);
  EXPECT_EQ(c->coordinator.port, 50051);
  EXPECT_FALSE(c->cpu_affinity);
  EXPECT_TRUE(ValidateClusterConfig(*c).ok());
}

TEST(ClusterConfigTest, ReadsEveryField) {
  auto c = ParseClusterConfig(R"({
    "host": "10.0.0.1",
    // Comments are allowed.
    "target": {"model": "/m/t", "tp": 2, "backend": "cuda", "threads": 3, "kv_cache_mb": 99,
               "comm": "nccl", "args": ["--block_size=32"]},
    "draft": {"model": "/m/d", "threads": 1, "kv_cache_mb": 7},
    "coordinator": {"port": 0, "metrics_port": -1, "rendezvous_port": 4000,
                    "pipelining": false, "max_k": 4, "max_running": 8, "max_queue": 9,
                    "args": ["--optimistic=false"]},
    "cpu_affinity": {"draft_cpus": "0", "target_cpus": "1-3"},
    "log_dir": "/tmp/x",
    "startup_timeout_s": 12.5
  })");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host, "10.0.0.1");
  EXPECT_EQ(c->target.model, "/m/t");
  EXPECT_EQ(c->tp, 2);
  EXPECT_EQ(c->target.backend, "cuda");
  EXPECT_EQ(c->target.threads, 3);
  EXPECT_EQ(c->target.kv_cache_mb, 99);
  EXPECT_EQ(c->comm, "nccl");
  EXPECT_THAT(c->target.args, ElementsAre("--block_size=32"));
  EXPECT_EQ(c->draft.model, "/m/d");
  EXPECT_EQ(c->draft.backend, "cpu");
  EXPECT_EQ(c->draft.kv_cache_mb, 7);
  EXPECT_EQ(c->coordinator.port, 0);
  EXPECT_EQ(c->coordinator.metrics_port, -1);
  EXPECT_EQ(c->coordinator.rendezvous_port, 4000);
  EXPECT_FALSE(c->coordinator.pipelining);
  EXPECT_EQ(c->coordinator.max_k, 4);
  EXPECT_EQ(c->coordinator.max_running, 8);
  EXPECT_EQ(c->coordinator.max_queue, 9);
  EXPECT_THAT(c->coordinator.args, ElementsAre("--optimistic=false"));
  EXPECT_TRUE(c->cpu_affinity);
  EXPECT_EQ(c->draft_cpus, "0");
  EXPECT_EQ(c->target_cpus, "1-3");
  EXPECT_EQ(c->log_dir, "/tmp/x");
  EXPECT_DOUBLE_EQ(c->startup_timeout_s, 12.5);
  EXPECT_TRUE(ValidateClusterConfig(*c).ok()) << ValidateClusterConfig(*c);
}

TEST(ClusterConfigTest, NullDraftMeansNoDraftWorker) {
  auto c = ParseClusterConfig(R"({"draft": null, "cpu_affinity": true})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->with_draft);
  EXPECT_TRUE(c->cpu_affinity);
}

TEST(ClusterConfigTest, UnknownKeysAndWrongTypesNameThePath) {
  auto unknown = ParseClusterConfig(R"({"target": {"tpp": 2}})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(Message(unknown.status()), HasSubstr("target.tpp: unknown key"));

  auto top = ParseClusterConfig(R"({"modle": "x"})");
  ASSERT_FALSE(top.ok());
  EXPECT_THAT(Message(top.status()), HasSubstr("modle: unknown key"));

  auto type = ParseClusterConfig(R"({"target": {"tp": "4"}})");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(Message(type.status()), HasSubstr("target.tp: expected an integer"));

  auto list = ParseClusterConfig(R"({"coordinator": {"args": ["a", 1]}})");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(Message(list.status()), HasSubstr("coordinator.args"));

  EXPECT_FALSE(ParseClusterConfig("{").ok());
  EXPECT_FALSE(ParseClusterConfig("[]").ok());
  EXPECT_FALSE(ParseClusterConfig(R"({"cpu_affinity": 1})").ok());
  EXPECT_FALSE(ParseClusterConfig(R"({"target": {"tp": 99999999999}})").ok());
}

TEST(ClusterConfigTest, ValidationCatchesBadValues) {
  auto bad = [](const char* text) {
    auto c = ParseClusterConfig(text);
    EXPECT_TRUE(c.ok()) << text << ": " << c.status();
    return c.ok() ? ValidateClusterConfig(*c) : absl::OkStatus();
  };
  EXPECT_THAT(Message(bad(R"({"target": {"tp": 0}})")), HasSubstr("target.tp"));
  EXPECT_THAT(Message(bad(R"({"target": {"backend": "tpu"}})")), HasSubstr("target.backend"));
  EXPECT_THAT(Message(bad(R"({"draft": {"model": ""}})")), HasSubstr("draft.model"));
  EXPECT_THAT(Message(bad(R"({"coordinator": {"port": 70000}})")), HasSubstr("coordinator.port"));
  EXPECT_THAT(Message(bad(R"({"coordinator": {"port": -1}})")), HasSubstr("coordinator.port"));
  EXPECT_THAT(Message(bad(R"({"target": {"kv_cache_mb": 0}})")), HasSubstr("kv_cache_mb"));
  EXPECT_THAT(Message(bad(R"({"target": {"comm": "local"}})")), HasSubstr("local"));
  EXPECT_THAT(Message(bad(R"({"cpu_affinity": {"draft_cpus": "0"}})")), HasSubstr("both"));
  EXPECT_THAT(Message(bad(R"({"cpu_affinity": {"draft_cpus": "x", "target_cpus": "1"}})")),
              HasSubstr("CPU list"));
  EXPECT_THAT(Message(bad(R"({"startup_timeout_s": 0})")), HasSubstr("startup_timeout_s"));
  // A draft with a bad model does not matter when there is no draft.
  EXPECT_TRUE(bad(R"({"draft": null})").ok());
}

TEST(ClusterConfigTest, JsonRoundTrip) {
  ClusterConfig c;
  c.host = "1.2.3.4";
  c.tp = 3;
  c.target.threads = 5;
  c.draft.args = {"--x=1"};
  c.coordinator.pipelining = false;
  c.coordinator.metrics_port = -1;
  c.cpu_affinity = true;
  c.draft_cpus = "0";
  c.target_cpus = "1-2";
  c.log_dir = "/l";
  c.restart.mode = RestartMode::kWorkers;
  c.restart.budget = 2;
  c.restart.backoff = absl::Milliseconds(250);
  auto back = ParseClusterConfig(ClusterConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ClusterConfigToJson(*back), ClusterConfigToJson(c));
  EXPECT_EQ(back->tp, 3);
  EXPECT_EQ(back->target.threads, 5);
  EXPECT_THAT(back->draft.args, ElementsAre("--x=1"));
  EXPECT_FALSE(back->coordinator.pipelining);
  EXPECT_EQ(back->target_cpus, "1-2");
  EXPECT_EQ(back->restart.mode, RestartMode::kWorkers);
  EXPECT_EQ(back->restart.budget, 2);
  EXPECT_EQ(back->restart.backoff, absl::Milliseconds(250));

  c.with_draft = false;
  auto no_draft = ParseClusterConfig(ClusterConfigToJson(c));
  ASSERT_TRUE(no_draft.ok());
  EXPECT_FALSE(no_draft->with_draft);
}

TEST(ClusterConfigTest, RestartPolicyKey) {
  auto defaults = ParseClusterConfig("{}");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->restart.mode, RestartMode::kAlways);
  EXPECT_EQ(defaults->restart.budget, 5);
  auto c = ParseClusterConfig(R"({"restart": {"policy": "never", "budget": 3, "window_s": 30,
                                               "backoff_s": 0.1, "max_backoff_s": 2}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->restart.mode, RestartMode::kNever);
  EXPECT_EQ(c->restart.budget, 3);
  EXPECT_EQ(c->restart.window, absl::Seconds(30));
  EXPECT_EQ(c->restart.backoff, absl::Milliseconds(100));
  EXPECT_EQ(c->restart.max_backoff, absl::Seconds(2));
  EXPECT_THAT(Message(ParseClusterConfig(R"({"restart": {"policy": "sometimes"}})").status()),
              HasSubstr("restart.policy: restart policy must be never, workers or always"));
  EXPECT_THAT(Message(ParseClusterConfig(R"({"restart": {"budgt": 1}})").status()),
              HasSubstr("restart.budgt: unknown key"));
  c->restart.backoff = absl::Seconds(5);  // Above max_backoff.
  EXPECT_FALSE(ValidateClusterConfig(*c).ok());
}

TEST(ClusterConfigTest, LoadNamesTheFile) {
  EXPECT_THAT(Message(LoadClusterConfig("/nonexistent/c.json").status()),
              HasSubstr("/nonexistent/c.json"));
  const std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                           "/cluster_config_test.json";
  {
    std::ofstream out(path);
    out << R"({"target": {"tp": "two"}})";
  }
  auto c = LoadClusterConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Message(c.status()), HasSubstr(path));
  EXPECT_THAT(Message(c.status()), HasSubstr("target.tp"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::client
