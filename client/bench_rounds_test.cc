#include "client/bench_rounds.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "client/fake_tandem_service.h"

namespace tandem::client {
namespace {

class BenchRoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::FakeTandemServer::Start(absl::Milliseconds(1));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->stub();
    settings_.prompts = {"a", "b", "c"};
    settings_.request.max_tokens = 3;
    settings_.timeout = absl::Seconds(10);
  }

  // Two rounds of 5 requests in 2 chunks per configuration; *runs gets the merged runs.
  std::vector<RepeatedResult> RunTwoChunkedRounds(std::vector<ConfigRun>* runs) {
    std::atomic<bool> interrupted{false};
    const RoundsSpec spec{/*repeat=*/2, /*requests=*/5, /*chunks=*/2, /*metrics=*/""};
    return RunRounds(stub_, settings_, configs_, spec, &interrupted, runs, nullptr, nullptr);
  }

  std::unique_ptr<testing::FakeTandemServer> server_;
  v1::Tandem::Stub* stub_ = nullptr;
  BenchSettings settings_;
  const std::vector<ConfigKey> configs_ =
      BenchConfigs({v1::SPECULATION_METHOD_NONE, v1::SPECULATION_METHOD_DRAFT},
                   {v1::ACCEPTANCE_RULE_DEFAULT}, {v1::PIPELINING_DEFAULT}, {1, 2});
};

TEST_F(BenchRoundsTest, ChunksOfARoundMakeOneRowWithEveryRequestOnce) {
  std::vector<ConfigRun> runs;
  const std::vector<RepeatedResult> results = RunTwoChunkedRounds(&runs);
  ASSERT_EQ(results.size(), configs_.size());
  for (const RepeatedResult& r : results) {
    ASSERT_EQ(r.repeats.size(), 2u);
    for (const ConfigResult& row : r.repeats) {
      EXPECT_EQ(row.requests, 5);
      EXPECT_EQ(row.ok, 5);
      EXPECT_EQ(row.generated_tokens, 15);
      EXPECT_GT(row.throughput_tok_s, 0);
      // Measured against `none` of the same round and concurrency.
      EXPECT_TRUE(std::isfinite(row.speedup_vs_none));
      if (r.key.method == v1::SPECULATION_METHOD_NONE) EXPECT_DOUBLE_EQ(row.speedup_vs_none, 1.0);
    }
  }
  // One merged run per configuration and round: requests 0-4 (chunks 0-2 and 3-4), so
  // prompts 0 1 2 0 1, each once.
  ASSERT_EQ(runs.size(), 2 * configs_.size());
  for (ConfigRun& run : runs) {
    std::sort(run.prompt_index.begin(), run.prompt_index.end());
    EXPECT_EQ(run.prompt_index, std::vector<int>({0, 0, 1, 1, 2}));
  }
  EXPECT_EQ(server_->service().calls(), 2 * 5 * static_cast<int>(configs_.size()));
}

TEST_F(BenchRoundsTest, EveryChunkIsRecordedWithItsPlaceInTheScheduleAndItsPredecessor) {
  std::vector<ConfigRun> runs;
  const std::vector<RepeatedResult> results = RunTwoChunkedRounds(&runs);
  std::map<int, std::pair<std::string, std::string>> by_position;  // label, after
  for (const RepeatedResult& r : results) {
    for (const ConfigResult& row : r.repeats) {
      ASSERT_EQ(row.chunks.size(), 2u);
      long long tokens = 0;
      double wall = 0;
      for (size_t i = 0; i < row.chunks.size(); ++i) {
        EXPECT_EQ(row.chunks[i].chunk, static_cast<int>(i));
        if (i > 0) EXPECT_GT(row.chunks[i].position, row.chunks[i - 1].position);
        tokens += row.chunks[i].generated_tokens;
        wall += row.chunks[i].wall_s;
        EXPECT_TRUE(by_position
                        .emplace(row.chunks[i].position,
                                 std::make_pair(ConfigLabel(r.key), row.chunks[i].after))
                        .second);
      }
      EXPECT_EQ(tokens, row.generated_tokens);
      EXPECT_NEAR(wall, row.wall_s, 1e-9);
    }
  }
  // Positions 0..N-1, each once; each run names the label of the one before it.
  ASSERT_EQ(by_position.size(), 2 * 2 * configs_.size());
  for (const auto& [position, label_and_after] : by_position) {
    EXPECT_EQ(label_and_after.second, position == 0 ? "" : by_position.at(position - 1).first);
  }
}

TEST_F(BenchRoundsTest, AnInterruptBeforeTheFirstChunkMeasuresNothing) {
  std::atomic<bool> interrupted{true};
  std::vector<ConfigRun> runs;
  const std::vector<RepeatedResult> results =
      RunRounds(stub_, settings_, configs_, RoundsSpec{}, &interrupted, &runs, nullptr, nullptr);
  EXPECT_TRUE(results.empty());
  EXPECT_TRUE(runs.empty());
  EXPECT_EQ(server_->service().calls(), 0);
}

TEST(ScrapeMetricsTest, NoAddressOrNoServerGivesNoSamples) {
  EXPECT_TRUE(ScrapeMetrics("").empty());
  EXPECT_TRUE(ScrapeMetrics("127.0.0.1:1").empty());
}

}  // namespace
}  // namespace tandem::client
