#include "client/up_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "client/shared_flags.h"

ABSL_DECLARE_FLAG(std::string, config);
ABSL_DECLARE_FLAG(std::string, draft);
ABSL_DECLARE_FLAG(int, tp);
ABSL_DECLARE_FLAG(int, port);
ABSL_DECLARE_FLAG(bool, cpu_affinity);
ABSL_DECLARE_FLAG(std::string, target_cpus);
ABSL_DECLARE_FLAG(std::string, draft_cpus);
ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(std::string, restart);
ABSL_DECLARE_FLAG(int, restart_budget);
ABSL_DECLARE_FLAG(double, restart_window);
ABSL_DECLARE_FLAG(double, restart_backoff);

namespace tandem::client {
namespace {

using ::testing::HasSubstr;

std::string WriteConfig(const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/up_config.json";
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigFromFlagsTest, DefaultsWithoutFileOrFlags) {
  auto c = ConfigFromFlags({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tp, 4);
  EXPECT_TRUE(c->with_draft);
  EXPECT_EQ(c->coordinator.port, 50051);
}

TEST(ConfigFromFlagsTest, FlagsGivenOverrideTheFileOthersDoNot) {
  absl::SetFlag(&FLAGS_config, WriteConfig(R"({"target": {"tp": 2, "model": "/t"},
                                              "coordinator": {"port": 7000}})"));
  absl::SetFlag(&FLAGS_tp, 3);    // Given.
  absl::SetFlag(&FLAGS_port, 9);  // Not given: the file's 7000 stays.
  auto c = ConfigFromFlags({"config", "tp"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tp, 3);
  EXPECT_EQ(c->coordinator.port, 7000);
  EXPECT_EQ(c->target.model, "/t");
  absl::SetFlag(&FLAGS_config, "");
  absl::SetFlag(&FLAGS_tp, 4);
  absl::SetFlag(&FLAGS_port, 50051);
}

TEST(ConfigFromFlagsTest, DraftNoneAndCoreListsAndPipelining) {
  absl::SetFlag(&FLAGS_draft, "none");
  absl::SetFlag(&FLAGS_draft_cpus, "0");
  absl::SetFlag(&FLAGS_target_cpus, "1");
  absl::SetFlag(&FLAGS_pipelining, "off");
  auto c = ConfigFromFlags({"draft", "draft_cpus", "target_cpus", "pipelining"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->with_draft);
  EXPECT_TRUE(c->cpu_affinity);  // Implied by the core lists.
  EXPECT_EQ(c->target_cpus, "1");
  EXPECT_FALSE(c->coordinator.pipelining);
  absl::SetFlag(&FLAGS_pipelining, "sideways");
  EXPECT_THAT(std::string(ConfigFromFlags({"pipelining"}).status().message()),
              HasSubstr("--pipelining"));
  absl::SetFlag(&FLAGS_pipelining, "default");
  absl::SetFlag(&FLAGS_draft, "models/draft");
  absl::SetFlag(&FLAGS_draft_cpus, "");
  absl::SetFlag(&FLAGS_target_cpus, "");
}

TEST(ConfigFromFlagsTest, CudaBackendSwitchesCollectivesToNccl) {
  absl::SetFlag(&FLAGS_backend, "cuda");
  auto c = ConfigFromFlags({"backend"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->target.backend, "cuda");
  EXPECT_EQ(c->draft.backend, "cuda");
  EXPECT_EQ(c->comm, "nccl");
  absl::SetFlag(&FLAGS_backend, "cpu");
}

TEST(ConfigFromFlagsTest, RestartFlagsOverrideTheFile) {
  absl::SetFlag(&FLAGS_config, WriteConfig(R"({"restart": {"policy": "workers", "budget": 9,
                                                           "window_s": 30}})"));
  absl::SetFlag(&FLAGS_restart, "never");
  absl::SetFlag(&FLAGS_restart_budget, 2);
  absl::SetFlag(&FLAGS_restart_backoff, 20);  // Above the default cap: raises it.
  auto c = ConfigFromFlags({"config", "restart", "restart_budget", "restart_backoff"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->restart.mode, RestartMode::kNever);
  EXPECT_EQ(c->restart.budget, 2);
  EXPECT_EQ(c->restart.window, absl::Seconds(30));  // From the file.
  EXPECT_EQ(c->restart.backoff, absl::Seconds(20));
  EXPECT_EQ(c->restart.max_backoff, absl::Seconds(20));
  absl::SetFlag(&FLAGS_restart, "sometimes");
  EXPECT_THAT(std::string(ConfigFromFlags({"restart"}).status().message()),
              HasSubstr("--restart: restart policy must be never, workers or always"));
  absl::SetFlag(&FLAGS_restart_window, 0);
  EXPECT_THAT(std::string(ConfigFromFlags({"restart_window"}).status().message()),
              HasSubstr("window_s"));
  absl::SetFlag(&FLAGS_config, "");
  absl::SetFlag(&FLAGS_restart, "always");
  absl::SetFlag(&FLAGS_restart_budget, 5);
  absl::SetFlag(&FLAGS_restart_window, 60);
  absl::SetFlag(&FLAGS_restart_backoff, 0.5);
}

TEST(ConfigFromFlagsTest, BadFileOrValuesAreErrors) {
  absl::SetFlag(&FLAGS_config, WriteConfig(R"({"target": {"tpp": 2}})"));
  EXPECT_THAT(std::string(ConfigFromFlags({"config"}).status().message()), HasSubstr("tpp"));
  absl::SetFlag(&FLAGS_config, "");
  absl::SetFlag(&FLAGS_tp, 0);
  EXPECT_THAT(std::string(ConfigFromFlags({"tp"}).status().message()), HasSubstr("tp"));
  absl::SetFlag(&FLAGS_tp, 4);
}

TEST(UpFlagHelpTest, EveryEntryIsARegisteredFlagOnce) {
  const std::vector<CommandFlag> help = UpFlagHelp();
  EXPECT_GE(help.size(), 25u);
  std::set<std::string> seen;
  for (const CommandFlag& f : help) {
    EXPECT_NE(absl::FindCommandLineFlag(f.name), nullptr) << f.name;
    EXPECT_TRUE(seen.insert(f.name).second) << f.name << " listed twice";
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
  for (const char* name : {"config", "tp", "restart_backoff", "ready_file", "dry_run"}) {
    EXPECT_EQ(seen.count(name), 1u) << name;
  }
}

}  // namespace
}  // namespace tandem::client
