// Failure handling of a 4-process target group: a killed (SIGKILL) or frozen (SIGSTOP)
// follower makes the leader answer UNAVAILABLE within a bounded time, never hang;
// restarting (or resuming) it brings the group back to SERVING with an empty cache
// (the coordinator re-prefills), and results match the ones before the failure bit
// for bit. A killed and restarted leader re-forms the group too.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "worker/process_test_util.h"
#include "worker/test_util.h"
#include "worker/verify_scenario.h"

namespace tandem {
namespace worker {
namespace {

using testing::Health;

constexpr int kVocab = 128;
constexpr int kTp = 4;
constexpr int kStepTimeoutS = 3;
// A failure must be answered within the step timeout plus scheduling slack (two
// collectives may time out back to back on this loaded 2-core machine).
constexpr absl::Duration kUnavailableBound = absl::Seconds(2 * kStepTimeoutS + 2);
// Re-forming takes up to two regroup timeouts after the rank is back, plus start-up.
constexpr absl::Duration kRecoveryBound = absl::Seconds(30);

class WorkerFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto group = testing::WorkerGroup::Start(
        testing::kTpCheckpoint, kTp, "fault",
        {"--kv_cache_mb=4", "--block_size=8", "--max_batch_tokens=256",
         absl::StrCat("--step_timeout_s=", kStepTimeoutS), "--heartbeat_s=0.5",
         "--leader_timeout_s=4", "--regroup_timeout_s=4"});
    ASSERT_TRUE(group.ok()) << group.status();
    group_ = *std::move(group);
    WaitAllServing();
    auto reference = testing::LoadTestModel(testing::kTpCheckpoint);
    ASSERT_TRUE(reference.ok()) << reference.status();
    prompts_ = {testing::Tokens(9, kVocab, 11), testing::Tokens(14, kVocab, 12)};
    for (const auto& prompt : prompts_) {
      oracle_.push_back(testing::GreedyContinuation(*reference->model, prompt, 30));
    }
  }

  void TearDown() override {
    if (group_ == nullptr) return;
    group_->process(0).Signal(SIGTERM);
    for (int r = 0; r < kTp; ++r) {
      EXPECT_EQ(group_->process(r).Wait(absl::Seconds(15)), 0) << "rank " << r << "\n"
                                                               << group_->Logs();
    }
  }

  void WaitAllServing() {
    for (int r = 0; r < kTp; ++r) {
      ASSERT_TRUE(testing::WaitForHealth(group_->address(r), Health::kServing, kRecoveryBound))
          << "rank " << r << "\n"
          << group_->Logs();
    }
  }

  absl::StatusOr<std::vector<testing::SequenceTrace>> Run() {
    auto stub = testing::WorkerStub(group_->leader_address());
    testing::ScenarioOptions options;
    options.base_id = 100;
    options.steps = 3;
    options.vocab_size = kVocab;
    return testing::RunGreedyScenario(*stub, prompts_, oracle_, options);
  }

  // One verify of a fresh sequence; the call's own deadline is generous so that a
  // hang would show up as a late answer rather than a client-side timeout.
  absl::Status VerifyOnce(uint64_t id, uint32_t start) {
    auto stub = testing::WorkerStub(group_->leader_address());
    v1::VerifyRequest request;
    v1::VerifySequence* s = request.add_sequences();
    s->set_sequence_id(id);
    s->set_start_position(start);
    s->add_tokens(5);
    s->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_GREEDY);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::VerifyResponse response;
    return testing::FromGrpc(stub->Verify(&context, request, &response));
  }

  // Verifies until the leader answers UNAVAILABLE; returns how long that took.
  absl::Duration TimeToUnavailable() {
    const absl::Time start = absl::Now();
    for (uint64_t id = 1000;; ++id) {
      absl::Status status = VerifyOnce(id, 0);
      if (absl::IsUnavailable(status)) {
        EXPECT_TRUE(absl::StrContains(status.message(), "target group regrouping")) << status;
        return absl::Now() - start;
      }
      if (!status.ok() || absl::Now() - start > absl::Seconds(60)) {
        ADD_FAILURE() << "expected OK or UNAVAILABLE, got " << status;
        return absl::InfiniteDuration();
      }
    }
  }

  void ExpectSameAsBefore(const std::vector<testing::SequenceTrace>& before) {
    // The cache was dropped: continuing needs a re-prefill.
    absl::Status stale = VerifyOnce(100, 5);
    EXPECT_EQ(stale.code(), absl::StatusCode::kNotFound) << stale;
    EXPECT_TRUE(absl::StrContains(stale.message(), "was the worker restarted?")) << stale;
    auto after = Run();
    ASSERT_TRUE(after.ok()) << after.status() << "\n" << group_->Logs();
    ASSERT_EQ(after->size(), before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ((*after)[i].committed, before[i].committed) << "sequence " << i;
      for (size_t s = 0; s < before[i].logprobs.size(); ++s) {
        ASSERT_EQ((*after)[i].logprobs[s].size(), before[i].logprobs[s].size());
        EXPECT_EQ(0, std::memcmp((*after)[i].logprobs[s].data(), before[i].logprobs[s].data(),
                                 before[i].logprobs[s].size() * sizeof(float)))
            << "sequence " << i << " step " << s;
      }
    }
  }

  std::unique_ptr<testing::WorkerGroup> group_;
  std::vector<std::vector<int32_t>> prompts_, oracle_;
};

TEST_F(WorkerFaultTest, KilledFollowerIsUnavailableThenRestartRecovers) {
  auto before = Run();
  ASSERT_TRUE(before.ok()) << before.status() << "\n" << group_->Logs();

  group_->process(2).Signal(SIGKILL);
  EXPECT_EQ(group_->process(2).Wait(absl::Seconds(5)), -2);
  const absl::Duration waited = TimeToUnavailable();
  EXPECT_LE(waited, kUnavailableBound) << group_->Logs();
  EXPECT_TRUE(
      testing::WaitForHealth(group_->leader_address(), Health::kNotServing, absl::Seconds(2)));
  // Still unavailable while rank 2 is gone, and quickly so.
  const absl::Time start = absl::Now();
  EXPECT_TRUE(absl::IsUnavailable(VerifyOnce(2000, 0)));
  EXPECT_LE(absl::Now() - start, absl::Seconds(1));

  ASSERT_TRUE(group_->Restart(2).ok());
  WaitAllServing();
  ExpectSameAsBefore(*before);
}

TEST_F(WorkerFaultTest, FrozenFollowerIsUnavailableWithinTheStepTimeout) {
  auto before = Run();
  ASSERT_TRUE(before.ok()) << before.status();
  group_->process(3).Signal(SIGSTOP);
  const absl::Duration waited = TimeToUnavailable();
  EXPECT_LE(waited, kUnavailableBound) << group_->Logs();
  group_->process(3).Signal(SIGCONT);
  WaitAllServing();
  ExpectSameAsBefore(*before);
}

TEST_F(WorkerFaultTest, KilledLeaderRestartsTheGroup) {
  auto before = Run();
  ASSERT_TRUE(before.ok()) << before.status();
  group_->process(0).Signal(SIGKILL);
  EXPECT_EQ(group_->process(0).Wait(absl::Seconds(5)), -2);
  // The followers notice and wait for a new generation.
  for (int r = 1; r < kTp; ++r) {
    EXPECT_TRUE(testing::WaitForHealth(group_->address(r), Health::kNotServing, absl::Seconds(10)))
        << "rank " << r;
  }
  ASSERT_TRUE(group_->Restart(0).ok());
  WaitAllServing();
  ExpectSameAsBefore(*before);
}

}  // namespace
}  // namespace worker
}  // namespace tandem
