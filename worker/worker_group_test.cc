// A 4-process tensor-parallel target group (four tandem-worker processes joined by
// gloo) against a 1-process target, over gRPC:
//  * the same greedy verify batches commit the same tokens (both equal to plain greedy
//    decoding by an in-process reference), and their log-probabilities agree within
//    1e-4 (tensor parallelism only reorders float32 additions: a few ulps of O(1)
//    logits; a sharding error would differ by O(0.1));
//  * on the group, a sequence's log-probabilities are bitwise identical whether it is
//    verified alone or in a batch, and from one run to the next;
//  * releases and truncations queued on the leader reach the followers (a follower that
//    kept its blocks would run out of KV where the leader does not, and the group would
//    break);
//  * idle followers do not spin;
//  * SIGTERM to the leader shuts the whole group down with exit code 0.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <memory>
#include <vector>

#include "worker/process_test_util.h"
#include "worker/test_util.h"
#include "worker/verify_scenario.h"

namespace tandem {
namespace worker {
namespace {

using testing::Health;

constexpr int kVocab = 128;
constexpr int kTp = 4;
constexpr double kTpLogprobTolerance = 1e-4;

const std::vector<std::string>& CommonFlags() {
  static const std::vector<std::string> flags = {
      "--kv_cache_mb=4",       "--block_size=8",        "--max_batch_tokens=256",
      "--step_timeout_s=10",   "--heartbeat_s=0.5",     "--leader_timeout_s=5",
      "--regroup_timeout_s=5", "--lease_timeout_s=600", "--comm=gloo",
  };
  return flags;
}

class WorkerGroupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto group = testing::WorkerGroup::Start(testing::kBundledTarget, kTp, "group", CommonFlags());
    ASSERT_TRUE(group.ok()) << group.status();
    group_ = group->release();
    auto single = testing::WorkerGroup::Start(testing::kBundledTarget, 1, "single", CommonFlags());
    ASSERT_TRUE(single.ok()) << single.status();
    single_ = single->release();
    ASSERT_TRUE(
        testing::WaitForHealth(single_->leader_address(), Health::kServing, absl::Seconds(20)))
        << single_->Logs();
    for (int r = 0; r < kTp; ++r) {
      ASSERT_TRUE(testing::WaitForHealth(group_->address(r), Health::kServing, absl::Seconds(25)))
          << "rank " << r << "\n"
          << group_->Logs();
    }
    // Prompts and their greedy continuations by plain decoding in this process.
    auto reference = testing::LoadTestModel(testing::kBundledTarget);
    ASSERT_TRUE(reference.ok()) << reference.status();
    prompts_ = new std::vector<std::vector<int32_t>>{testing::Tokens(7, kVocab, 1),
                                                     testing::Tokens(12, kVocab, 2),
                                                     testing::Tokens(20, kVocab, 3)};
    oracle_ = new std::vector<std::vector<int32_t>>();
    for (const auto& prompt : *prompts_) {
      oracle_->push_back(testing::GreedyContinuation(*reference->model, prompt, 40));
    }
  }

  static void TearDownTestSuite() {
    delete group_;
    delete single_;
    delete prompts_;
    delete oracle_;
  }

  static std::vector<testing::SequenceTrace> Run(const std::string& address, uint64_t base_id,
                                                 bool batched) {
    auto stub = testing::WorkerStub(address);
    testing::ScenarioOptions options;
    options.base_id = base_id;
    options.batched = batched;
    options.vocab_size = kVocab;
    auto traces = testing::RunGreedyScenario(*stub, *prompts_, *oracle_, options);
    EXPECT_TRUE(traces.ok()) << traces.status();
    return traces.ok() ? *traces : std::vector<testing::SequenceTrace>();
  }

  static void ExpectFollowsOracle(const std::vector<testing::SequenceTrace>& traces) {
    ASSERT_EQ(traces.size(), prompts_->size());
    for (size_t i = 0; i < traces.size(); ++i) {
      std::vector<int32_t> all;
      for (const auto& step : traces[i].committed) all.insert(all.end(), step.begin(), step.end());
      ASSERT_LE(all.size(), (*oracle_)[i].size());
      EXPECT_EQ(all,
                std::vector<int32_t>((*oracle_)[i].begin(), (*oracle_)[i].begin() + all.size()))
          << "sequence " << i;
    }
  }

  static void ExpectBitwiseEqual(const std::vector<testing::SequenceTrace>& a,
                                 const std::vector<testing::SequenceTrace>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].committed, b[i].committed) << "sequence " << i;
      ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size());
      for (size_t s = 0; s < a[i].logprobs.size(); ++s) {
        ASSERT_EQ(a[i].logprobs[s].size(), b[i].logprobs[s].size());
        EXPECT_EQ(0, std::memcmp(a[i].logprobs[s].data(), b[i].logprobs[s].data(),
                                 a[i].logprobs[s].size() * sizeof(float)))
            << "sequence " << i << " step " << s;
      }
    }
  }

  static testing::WorkerGroup* group_;
  static testing::WorkerGroup* single_;
  static std::vector<std::vector<int32_t>>* prompts_;
  static std::vector<std::vector<int32_t>>* oracle_;
};

testing::WorkerGroup* WorkerGroupTest::group_ = nullptr;
testing::WorkerGroup* WorkerGroupTest::single_ = nullptr;
std::vector<std::vector<int32_t>>* WorkerGroupTest::prompts_ = nullptr;
std::vector<std::vector<int32_t>>* WorkerGroupTest::oracle_ = nullptr;

TEST_F(WorkerGroupTest, GroupMatchesTheSingleProcessTarget) {
  const auto group = Run(group_->leader_address(), 100, true);
  const auto single = Run(single_->leader_address(), 100, true);
  ExpectFollowsOracle(group);
  ExpectFollowsOracle(single);
  ASSERT_EQ(group.size(), single.size());
  int accepted_steps = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    ASSERT_EQ(group[i].committed, single[i].committed) << "sequence " << i;
    for (size_t s = 0; s < group[i].logprobs.size(); ++s) {
      ASSERT_EQ(group[i].logprobs[s].size(), single[i].logprobs[s].size());
      for (size_t j = 0; j < group[i].logprobs[s].size(); ++j) {
        EXPECT_NEAR(group[i].logprobs[s][j], single[i].logprobs[s][j], kTpLogprobTolerance)
            << "sequence " << i << " step " << s << " token " << j;
      }
      if (group[i].committed[s].size() > 1) ++accepted_steps;
    }
  }
  EXPECT_GT(accepted_steps, 0) << "the scenario should accept some proposals";
}

// A greedy tree step (whose kept path is compacted on every rank) and a chain step
// after it: the group agrees with the single process and with plain decoding.
TEST_F(WorkerGroupTest, TreesMatchTheSingleProcessTarget) {
  const std::vector<int32_t>& prompt = (*prompts_)[1];
  const std::vector<int32_t>& oracle = (*oracle_)[1];
  const auto run = [&](const std::string& address) {
    auto stub = testing::WorkerStub(address);
    std::vector<std::vector<int32_t>> committed;
    std::vector<std::vector<float>> logprobs;
    v1::PrefillRequest prefill;
    v1::PrefillSequence* p = prefill.add_sequences();
    p->set_sequence_id(500);
    p->mutable_tokens()->Assign(prompt.begin(), prompt.end() - 1);
    grpc::ClientContext prefill_context;
    v1::PrefillResponse prefilled;
    EXPECT_TRUE(stub->Prefill(&prefill_context, prefill, &prefilled).ok());
    // Branch A: wrong first token (nodes 0, 2); branch B: the oracle (nodes 1, 3, 4).
    const std::vector<int32_t> tokens = {(oracle[0] + 1) % kVocab, oracle[0], oracle[1], oracle[1],
                                         oracle[2]};
    const std::vector<int32_t> parents = {-1, -1, 0, 1, 3};
    uint32_t start = prompt.size() - 1;
    std::vector<int32_t> feed = {prompt.back()};
    for (int step = 0; step < 2; ++step) {
      v1::VerifyRequest request;
      v1::VerifySequence* s = request.add_sequences();
      s->set_sequence_id(500);
      s->set_start_position(start);
      s->mutable_tokens()->Assign(feed.begin(), feed.end());
      const size_t done = committed.empty() ? 0 : committed[0].size();
      for (int j = 0; j < 5; ++j) {
        const int32_t t = step == 0 ? tokens[j] : oracle[done + j];
        v1::ProposedToken* proposal = s->add_proposals();
        proposal->set_token(t);
        proposal->add_q_ids(t);
        proposal->add_q_probs(1.0f);
        if (step == 0) s->add_proposal_parents(parents[j]);
      }
      s->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_GREEDY);
      s->mutable_sampling()->set_return_logprobs(true);
      grpc::ClientContext context;
      v1::VerifyResponse response;
      EXPECT_TRUE(stub->Verify(&context, request, &response).ok());
      if (response.sequences_size() != 1) return std::make_pair(committed, logprobs);
      const v1::VerifiedSequence& out = response.sequences(0);
      committed.emplace_back(out.committed().begin(), out.committed().end());
      logprobs.emplace_back(out.logprobs().begin(), out.logprobs().end());
      start = out.cached_length();
      feed = {out.committed(out.committed_size() - 1)};
    }
    return std::make_pair(committed, logprobs);
  };
  const auto group = run(group_->leader_address());
  const auto single = run(single_->leader_address());
  ASSERT_EQ(group.first.size(), 2u);
  // Step 0 accepts the oracle branch (3 proposals) and adds the bonus.
  EXPECT_EQ(group.first[0], std::vector<int32_t>(oracle.begin(), oracle.begin() + 4));
  EXPECT_EQ(group.first[1], std::vector<int32_t>(oracle.begin() + 4, oracle.begin() + 10));
  EXPECT_EQ(group.first, single.first);
  for (size_t s = 0; s < group.second.size(); ++s) {
    ASSERT_EQ(group.second[s].size(), single.second[s].size());
    for (size_t j = 0; j < group.second[s].size(); ++j) {
      EXPECT_NEAR(group.second[s][j], single.second[s][j], kTpLogprobTolerance);
    }
  }
}

TEST_F(WorkerGroupTest, GroupIsBatchInvariantAndReproducible) {
  const auto alone = Run(group_->leader_address(), 200, false);
  const auto batched = Run(group_->leader_address(), 300, true);
  const auto again = Run(group_->leader_address(), 400, true);
  ExpectFollowsOracle(alone);
  ExpectBitwiseEqual(alone, batched);
  ExpectBitwiseEqual(batched, again);
}

TEST_F(WorkerGroupTest, DescribeAndStatsReportTheGroup) {
  auto stub = testing::WorkerStub(group_->leader_address());
  grpc::ClientContext context;
  v1::DescribeResponse d;
  ASSERT_TRUE(stub->Describe(&context, v1::DescribeRequest(), &d).ok());
  EXPECT_EQ(d.tp_size(), static_cast<uint32_t>(kTp));
  EXPECT_EQ(d.collective_backend(), "gloo");
  EXPECT_EQ(d.model().tensor_parallel_size(), static_cast<uint32_t>(kTp));
  grpc::ClientContext stats_context;
  v1::WorkerStats stats;
  ASSERT_TRUE(stub->GetStats(&stats_context, v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.instance_id(), d.instance_id());
  // Followers serve health only.
  auto follower = testing::WorkerStub(group_->address(1));
  grpc::ClientContext follower_context;
  follower_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(follower->Describe(&follower_context, v1::DescribeRequest(), &d).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(WorkerGroupTest, ReleasesReachTheFollowers) {
  auto stub = testing::WorkerStub(group_->leader_address());
  const auto stats = [&] {
    grpc::ClientContext context;
    v1::WorkerStats s;
    EXPECT_TRUE(stub->GetStats(&context, v1::GetStatsRequest(), &s).ok());
    return s;
  };
  const v1::WorkerStats start = stats();
  const int free_blocks = static_cast<int>(start.kv_total_blocks() - start.kv_used_blocks());
  const int tokens = 248;  // 31 blocks of 8.
  const int per_round = free_blocks * 9 / 10 / 31;
  ASSERT_GT(per_round, 10);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < per_round; ++i) {
      v1::PrefillRequest request;
      v1::PrefillSequence* s = request.add_sequences();
      s->set_sequence_id(10000 + 1000 * round + i);
      for (int t = 0; t < tokens; ++t) s->add_tokens((t * 7 + i) % kVocab);
      grpc::ClientContext context;
      v1::PrefillResponse response;
      ASSERT_TRUE(stub->Prefill(&context, request, &response).ok())
          << "round " << round << " sequence " << i << "\n"
          << group_->Logs();
    }
    EXPECT_EQ(stats().kv_used_blocks(), start.kv_used_blocks() + per_round * 31);
    v1::ReleaseRequest release;
    for (int i = 0; i < per_round; ++i) release.add_sequence_ids(10000 + 1000 * round + i);
    grpc::ClientContext context;
    v1::ReleaseResponse released;
    ASSERT_TRUE(stub->Release(&context, release, &released).ok());
    EXPECT_EQ(released.released(), static_cast<uint32_t>(per_round));
    EXPECT_EQ(stats().kv_used_blocks(), start.kv_used_blocks());
    // Round 1 leaves the releases to the idle heartbeat; the others to the next step.
    if (round == 1) absl::SleepFor(absl::Seconds(1.5));
  }
  EXPECT_EQ(testing::CheckHealth(group_->leader_address()), Health::kServing);
}

TEST_F(WorkerGroupTest, IdleFollowersDoNotSpin) {
  std::vector<double> before;
  for (int r = 1; r < kTp; ++r) before.push_back(group_->process(r).CpuSeconds());
  absl::SleepFor(absl::Seconds(2));
  for (int r = 1; r < kTp; ++r) {
    const double used = group_->process(r).CpuSeconds() - before[r - 1];
    EXPECT_LT(used, 0.3) << "rank " << r << " used " << used << " s of CPU in 2 s idle";
  }
}

// Last: shuts the group down.
TEST_F(WorkerGroupTest, SigtermOnTheLeaderStopsTheWholeGroup) {
  group_->process(0).Signal(SIGTERM);
  for (int r = 0; r < kTp; ++r) {
    EXPECT_EQ(group_->process(r).Wait(absl::Seconds(15)), 0) << "rank " << r << "\n"
                                                             << group_->Logs();
  }
  single_->process(0).Signal(SIGTERM);
  EXPECT_EQ(single_->process(0).Wait(absl::Seconds(10)), 0) << single_->Logs();
}

}  // namespace
}  // namespace worker
}  // namespace tandem
