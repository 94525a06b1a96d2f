#include "worker/timed_communicator.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "comm/local_communicator.h"

namespace tandem {
namespace worker {
namespace {

TEST(TimedCommunicatorTest, DetachedFailsWithUnavailable) {
  TimedCommunicator comm(1, 2, "gloo");
  EXPECT_EQ(comm.rank(), 1);
  EXPECT_EQ(comm.size(), 2);
  EXPECT_EQ(comm.backend(), "gloo");
  EXPECT_FALSE(comm.attached());
  float x = 1;
  EXPECT_EQ(comm.AllReduceSum(&x, 1, absl::Seconds(1)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(comm.Barrier(absl::Seconds(1)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(comm.failures(), 2);
  EXPECT_EQ(comm.calls(), 2);
}

TEST(TimedCommunicatorTest, ForwardsToTheAttachedGroupAndTimesIt) {
  auto group = LocalGroup::Create(2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::unique_ptr<TimedCommunicator>> timed;
  for (int r = 0; r < 2; ++r) {
    timed.push_back(std::make_unique<TimedCommunicator>(r, 2, "local"));
    EXPECT_EQ(timed[r]->Reset(std::move((*group)[r])), nullptr);
  }
  std::vector<float> data[2] = {{1, 2}, {10, 20}};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_TRUE(timed[r]->AllReduceSum(data[r].data(), 2, absl::Seconds(5)).ok());
      // Rank 1 arrives late at the barrier: rank 0 waits there.
      if (r == 1) absl::SleepFor(absl::Milliseconds(50));
      ASSERT_TRUE(timed[r]->Barrier(absl::Seconds(5)).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(data[0], std::vector<float>({11, 22}));
  EXPECT_EQ(data[1], std::vector<float>({11, 22}));
  EXPECT_GE(timed[0]->collective_ns(), 40'000'000);  // The 50 ms wait, give or take.
  EXPECT_EQ(timed[0]->failures(), 0);
  EXPECT_EQ(timed[0]->calls(), 2);
  // Detaching returns the communicator.
  EXPECT_NE(timed[0]->Reset(nullptr), nullptr);
  EXPECT_FALSE(timed[0]->attached());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
