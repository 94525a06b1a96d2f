#include "client/bench_soak.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace tandem::client {
namespace {

TEST(RssTrackerTest, TracksStartEndAndPeakOfALiveProcess) {
  RssTracker rss({getpid(), 999999999});  // This process and one that does not exist.
  std::vector<char> grow(64 << 20, 1);    // 64 MiB touched: the peak grows.
  rss.Sample();
  const nlohmann::json j = rss.PrintAndJson();
  const nlohmann::json& self = j[std::to_string(getpid())];
  EXPECT_GT(self["start_kib"].get<long>(), 0);
  EXPECT_GE(self["max_kib"].get<long>(), self["end_kib"].get<long>());
  EXPECT_GE(self["max_kib"].get<long>(), self["start_kib"].get<long>() + 32 * 1024);
  EXPECT_EQ(j["999999999"]["start_kib"].get<long>(), -1);  // Unreadable: -1.
  EXPECT_EQ(grow[grow.size() - 1], 1);
}

TEST(ReportSoakTest, RecordCarriesCountsErrorsAndTimes) {
  ConfigResult row;
  row.key.method = v1::SPECULATION_METHOD_DRAFT;
  row.key.concurrency = 3;
  row.requests = 10;
  row.ok = 8;
  row.errors = {{"deadline_exceeded", 2}};
  row.wall_s = 60;
  RssTracker rss({});
  const nlohmann::json j =
      ReportSoak(row, absl::FromUnixSeconds(0), absl::FromUnixSeconds(60), rss, true);
  EXPECT_EQ(j["start"], "1970-01-01T00:00:00Z");
  EXPECT_EQ(j["end"], "1970-01-01T00:01:00Z");
  EXPECT_EQ(j["requests_served"], 8);
  EXPECT_EQ(j["requests_failed"], 2);
  EXPECT_EQ(j["errors"]["deadline_exceeded"], 2);
  EXPECT_EQ(j["interrupted"], true);
  EXPECT_EQ(j["result"]["method"], "draft");
}

}  // namespace
}  // namespace tandem::client
