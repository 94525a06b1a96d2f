#include "client/load_runner.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "absl/time/clock.h"
#include "client/fake_tandem_service.h"

namespace tandem::client {
namespace {

class LoadRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::FakeTandemServer::Start(absl::Milliseconds(20));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = server_->stub();
  }

  static v1::GenerateRequest Request(const std::string& prompt, int tokens) {
    v1::GenerateRequest r;
    r.set_text(prompt);
    r.set_max_new_tokens(tokens);
    return r;
  }

  std::unique_ptr<testing::FakeTandemServer> server_;
  v1::Tandem::Stub* stub_ = nullptr;
};

TEST_F(LoadRunnerTest, StreamOneMeasuresAsTheClientSeesIt) {
  RequestResult r = StreamOne(stub_, Request("p", 5), absl::Seconds(10));
  ASSERT_EQ(r.code, absl::StatusCode::kOk) << r.error;
  EXPECT_EQ(r.text, "p#0 p#1 p#2 p#3 p#4 ");
  ASSERT_TRUE(r.has_stats);
  EXPECT_EQ(r.stats.generated_tokens(), 5u);
  EXPECT_EQ(r.finish, v1::FINISH_REASON_LENGTH);
  // The server sends a token every 20 ms: the first after >= 20 ms and the last after
  // >= 100 ms. The gaps the client sees can be shorter than 20 ms when a late first token
  // arrives in a burst with the next ones (a loaded or sanitized run), so the time per
  // output token is bounded by the totals only.
  EXPECT_GE(r.ttft_ms, 19);
  EXPECT_GE(r.latency_ms, 5 * 19);
  EXPECT_GT(r.tpot_ms, 0);
  EXPECT_LT(r.tpot_ms, 200);
  EXPECT_LE(r.ttft_ms + 4 * r.tpot_ms, r.latency_ms + 1e-6);  // The last token is before the end.
}

TEST_F(LoadRunnerTest, StreamOneReportsErrorsAndTimeouts) {
  RequestResult bad = StreamOne(stub_, Request("fail", 3), absl::Seconds(10));
  EXPECT_EQ(bad.code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.error, "fake: bad prompt");
  EXPECT_TRUE(std::isnan(bad.ttft_ms));
  RequestResult late = StreamOne(stub_, Request("slow", 50), absl::Milliseconds(100));
  EXPECT_EQ(late.code, absl::StatusCode::kDeadlineExceeded);
}

TEST_F(LoadRunnerTest, RunsTheRequestedNumberAtTheRequestedConcurrency) {
  std::map<int, std::string> texts;
  LoadSpec spec;
  spec.concurrency = 3;
  spec.requests = 9;
  RunLoad(
      stub_, spec, [](int number) { return Request("r" + std::to_string(number), 4); },
      [&texts](int number, const RequestResult& r) {
        EXPECT_EQ(r.code, absl::StatusCode::kOk);
        texts[number] = r.text;
      });
  ASSERT_EQ(texts.size(), 9u);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(texts[i].rfind("r" + std::to_string(i) + "#0 ", 0), 0u) << texts[i];
  }
  EXPECT_EQ(server_->service().calls(), 9);
  EXPECT_EQ(server_->service().max_in_flight(), 3);
}

TEST_F(LoadRunnerTest, DurationModeKeepsGoingUntilTimeIsUp) {
  int finished = 0;
  LoadSpec spec;
  spec.concurrency = 2;
  spec.duration = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  RunLoad(
      stub_, spec, [](int) { return Request("s", 2); },
      [&finished](int, const RequestResult&) { ++finished; });
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(500));
  EXPECT_LT(took, absl::Seconds(5));
  // Each request takes ~40 ms: about 2 * 500 / 40 = 25 in the window.
  EXPECT_GE(finished, 8);
}

TEST_F(LoadRunnerTest, StopFlagEndsTheRunEarly) {
  std::atomic<bool> stop{false};
  int finished = 0;
  LoadSpec spec;
  spec.concurrency = 1;
  spec.requests = 1000;
  RunLoad(
      stub_, spec, [](int) { return Request("x", 1); },
      [&](int, const RequestResult&) {
        if (++finished == 3) stop = true;
      },
      &stop);
  EXPECT_EQ(finished, 3);
}

}  // namespace
}  // namespace tandem::client
