// WorkerService: bad requests with their status codes (the verify rules in detail:
// request_validation_test.cc), role checks, leases, stats and the restart rules of
// unknown sequences.
#include "worker/worker_service.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "worker/test_util.h"

namespace tandem {
namespace worker {
namespace {

using testing::Greedy;
using testing::PointProposal;

constexpr int kVocab = 128;
constexpr int kMaxBatchTokens = 64;
constexpr int kMaxK = 4;

class WorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto* loaded : {&target_model_, &draft_model_}) {
      auto model = testing::LoadTestExecutor(testing::kTpCheckpoint, kMaxBatchTokens);
      ASSERT_TRUE(model.ok()) << model.status();
      *loaded = *std::move(model);
    }
    WorkerServiceOptions options;
    options.max_speculative_tokens = kMaxK;
    options.lease_timeout = absl::Seconds(30);
    options.model_name = "tiny";
    options.role = v1::WORKER_ROLE_TARGET;
    target_ = std::make_unique<WorkerService>(target_model_.executor.get(), options);
    options.role = v1::WORKER_ROLE_DRAFT;
    draft_ = std::make_unique<WorkerService>(draft_model_.executor.get(), options);
    // Sequence 1 holds 6 tokens on both workers.
    v1::PrefillRequest prefill;
    v1::PrefillSequence* s = prefill.add_sequences();
    s->set_sequence_id(1);
    for (int t : {3, 1, 4, 1, 5, 9}) s->add_tokens(t);
    v1::PrefillResponse response;
    ASSERT_TRUE(target_->DoPrefill(prefill, &response).ok());
    ASSERT_TRUE(draft_->DoPrefill(prefill, &response).ok());
  }

  static v1::VerifyRequest GoodVerify() {
    v1::VerifyRequest request;
    v1::VerifySequence* s = request.add_sequences();
    s->set_sequence_id(1);
    s->set_start_position(6);
    s->add_tokens(2);
    *s->add_proposals() = PointProposal(6);
    *s->add_proposals() = PointProposal(5);
    *s->mutable_sampling() = Greedy();
    return request;
  }

  static v1::DraftRequest GoodDraft() {
    v1::DraftRequest request;
    v1::DraftSequence* s = request.add_sequences();
    s->set_sequence_id(1);
    s->set_start_position(6);
    s->add_tokens(2);
    s->set_num_draft_tokens(3);
    *s->mutable_sampling() = Greedy();
    return request;
  }

  testing::TestExecutor target_model_, draft_model_;
  std::unique_ptr<WorkerService> target_, draft_;
};

TEST_F(WorkerServiceTest, BadVerifyRequestsLeaveTheCache) {
  // The validation rules themselves: request_validation_test.cc.
  v1::VerifyRequest bad = GoodVerify();
  bad.mutable_sequences(0)->set_start_position(7);
  v1::VerifyResponse response;
  EXPECT_EQ(target_->DoVerify(bad, &response).code(), absl::StatusCode::kInvalidArgument);
  bad = GoodVerify();
  bad.mutable_sequences(0)->set_sequence_id(99);
  EXPECT_EQ(target_->DoVerify(bad, &response).code(), absl::StatusCode::kNotFound);
  // Nothing above changed the cache, and the unmodified request still works, as does
  // the same proposals as a tree of two siblings under rejection sampling.
  EXPECT_EQ(*target_model_.executor->CachedLength(1), 6);
  v1::VerifyRequest tree = GoodVerify();
  tree.mutable_sequences(0)->mutable_sampling()->set_temperature(1);
  tree.mutable_sequences(0)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
  tree.mutable_sequences(0)->add_proposal_parents(-1);
  tree.mutable_sequences(0)->add_proposal_parents(-1);
  const absl::Status tree_status = target_->DoVerify(tree, &response);
  EXPECT_TRUE(tree_status.ok()) << tree_status;
  EXPECT_TRUE(target_->DoVerify(GoodVerify(), &response).ok());
}

TEST_F(WorkerServiceTest, BadDraftPrefillAndTruncateRequests) {
  struct Case {
    std::string name;
    std::function<absl::Status()> call;
    absl::StatusCode code;
  };
  const auto draft = [&](std::function<void(v1::DraftSequence*)> mutate) {
    return [this, mutate] {
      v1::DraftRequest r = GoodDraft();
      mutate(r.mutable_sequences(0));
      v1::DraftResponse response;
      return draft_->DoDraft(r, &response);
    };
  };
  const auto prefill = [&](uint64_t id, uint32_t start, std::vector<int32_t> tokens) {
    return [this, id, start, tokens] {
      v1::PrefillRequest r;
      v1::PrefillSequence* s = r.add_sequences();
      s->set_sequence_id(id);
      s->set_start_position(start);
      s->mutable_tokens()->Assign(tokens.begin(), tokens.end());
      v1::PrefillResponse response;
      return target_->DoPrefill(r, &response);
    };
  };
  const auto truncate = [&](uint64_t id, uint32_t length) {
    return [this, id, length] {
      v1::TruncateRequest r;
      auto* item = r.add_items();
      item->set_sequence_id(id);
      item->set_length(length);
      return target_->DoTruncate(r);
    };
  };
  const std::vector<Case> cases = {
      {"draft K = 0", draft([](v1::DraftSequence* s) { s->set_num_draft_tokens(0); }),
       absl::StatusCode::kInvalidArgument},
      {"draft K over max", draft([](v1::DraftSequence* s) { s->set_num_draft_tokens(kMaxK + 1); }),
       absl::StatusCode::kInvalidArgument},
      {"draft top_k over 256", draft([](v1::DraftSequence* s) { s->set_proposal_top_k(257); }),
       absl::StatusCode::kInvalidArgument},
      {"draft num_top over 16", draft([](v1::DraftSequence* s) { s->set_num_top(17); }),
       absl::StatusCode::kInvalidArgument},
      {"draft token past vocab", draft([](v1::DraftSequence* s) { s->set_tokens(0, 1000); }),
       absl::StatusCode::kInvalidArgument},
      {"draft no tokens", draft([](v1::DraftSequence* s) { s->clear_tokens(); }),
       absl::StatusCode::kInvalidArgument},
      {"draft unknown id", draft([](v1::DraftSequence* s) { s->set_sequence_id(42); }),
       absl::StatusCode::kNotFound},
      {"draft start past cached", draft([](v1::DraftSequence* s) { s->set_start_position(9); }),
       absl::StatusCode::kInvalidArgument},
      {"draft branch of an unknown sequence", draft([](v1::DraftSequence* s) {
         s->set_sequence_id(9);
         s->set_fork_from(42);
       }),
       absl::StatusCode::kNotFound},
      {"draft branch past its parent's cache", draft([](v1::DraftSequence* s) {
         s->set_sequence_id(9);
         s->set_fork_from(1);
         s->set_start_position(9);
       }),
       absl::StatusCode::kInvalidArgument},
      {"draft branch of a sequence the request drafts",
       draft([](v1::DraftSequence* s) { s->set_fork_from(1); }),
       absl::StatusCode::kInvalidArgument},
      {"draft tree_width without tree_nodes",
       draft([](v1::DraftSequence* s) { s->set_tree_width(2); }),
       absl::StatusCode::kInvalidArgument},
      {"draft tree_nodes over max", draft([](v1::DraftSequence* s) {
         s->set_tree_nodes(kMaxK + 1);
         s->set_tree_width(2);
       }),
       absl::StatusCode::kInvalidArgument},
      {"draft tree without width", draft([](v1::DraftSequence* s) { s->set_tree_nodes(2); }),
       absl::StatusCode::kInvalidArgument},
      {"draft tree_width over 16", draft([](v1::DraftSequence* s) {
         s->set_tree_nodes(2);
         s->set_tree_width(17);
       }),
       absl::StatusCode::kInvalidArgument},
      {"draft tree under rejection", draft([](v1::DraftSequence* s) {
         s->set_tree_nodes(2);
         s->set_tree_width(2);
         s->mutable_sampling()->set_temperature(0.8f);
         s->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
       }),
       absl::StatusCode::kInvalidArgument},
      {"draft tree with num_top", draft([](v1::DraftSequence* s) {
         s->set_tree_nodes(2);
         s->set_tree_width(2);
         s->set_num_top(2);
       }),
       absl::StatusCode::kInvalidArgument},
      {"draft bad top_p",
       draft([](v1::DraftSequence* s) { s->mutable_sampling()->set_top_p(-0.5f); }),
       absl::StatusCode::kInvalidArgument},
      {"draft on the target worker",
       [&] {
         v1::DraftResponse response;
         return target_->DoDraft(GoodDraft(), &response);
       },
       absl::StatusCode::kFailedPrecondition},
      {"verify on the draft worker",
       [&] {
         v1::VerifyResponse response;
         return draft_->DoVerify(GoodVerify(), &response);
       },
       absl::StatusCode::kFailedPrecondition},
      {"prefill no tokens", prefill(5, 0, {}), absl::StatusCode::kInvalidArgument},
      {"prefill token past vocab", prefill(5, 0, {kVocab}), absl::StatusCode::kInvalidArgument},
      {"prefill unknown id at start > 0", prefill(5, 3, {1}), absl::StatusCode::kNotFound},
      {"prefill over max_batch_tokens", prefill(5, 0, std::vector<int32_t>(kMaxBatchTokens + 1, 1)),
       absl::StatusCode::kResourceExhausted},
      {"truncate unknown id", truncate(77, 0), absl::StatusCode::kNotFound},
      {"truncate past the length", truncate(1, 7), absl::StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    absl::Status status = c.call();
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
  }
  EXPECT_TRUE(truncate(1, 4)().ok());
  EXPECT_EQ(*target_model_.executor->CachedLength(1), 4);
}

TEST_F(WorkerServiceTest, UnknownSequencesAreCreatedOnlyAtPositionZero) {
  v1::VerifyRequest request = GoodVerify();
  request.mutable_sequences(0)->set_sequence_id(50);
  request.mutable_sequences(0)->set_start_position(3);
  v1::VerifyResponse response;
  absl::Status status = target_->DoVerify(request, &response);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(status.message().find("unknown sequence 50: was the worker restarted?"),
            std::string::npos)
      << status;
  request.mutable_sequences(0)->set_start_position(0);
  ASSERT_TRUE(target_->DoVerify(request, &response).ok());
  EXPECT_EQ(*target_model_.executor->CachedLength(50),
            static_cast<int>(response.sequences(0).cached_length()));
}

TEST_F(WorkerServiceTest, LeasesReleaseUntouchedSequences) {
  v1::VerifyResponse verified;
  ASSERT_TRUE(target_->DoVerify(GoodVerify(), &verified).ok());
  const absl::Time now = absl::Now();
  EXPECT_EQ(target_->ExpireLeases(now + absl::Seconds(10)), 0);
  EXPECT_EQ(target_->ExpireLeases(now + absl::Seconds(31)), 1);
  EXPECT_FALSE(target_model_.executor->CachedLength(1).ok());
  v1::WorkerStats stats;
  ASSERT_TRUE(target_->DoGetStats(&stats).ok());
  EXPECT_EQ(stats.leases_expired(), 1u);
  EXPECT_EQ(stats.active_sequences(), 0u);
  EXPECT_EQ(stats.kv_used_blocks(), 0u);
}

TEST_F(WorkerServiceTest, ReleaseIsIdempotentAndStatsCount) {
  v1::VerifyResponse verified;
  ASSERT_TRUE(target_->DoVerify(GoodVerify(), &verified).ok());
  v1::WorkerStats stats;
  ASSERT_TRUE(target_->DoGetStats(&stats).ok());
  EXPECT_EQ(stats.steps(), 2u);             // Prefill + verify.
  EXPECT_EQ(stats.tokens_processed(), 9u);  // 6 + (1 + 2).
  EXPECT_EQ(stats.active_sequences(), 1u);
  EXPECT_GT(stats.kv_used_blocks(), 0u);
  EXPECT_GT(stats.busy_ms(), 0.0);
  EXPECT_GT(stats.compute_ms(), 0.0);
  EXPECT_EQ(stats.instance_id(), target_->instance_id());
  EXPECT_NE(target_->instance_id(), draft_->instance_id());
  v1::ReleaseRequest release;
  release.add_sequence_ids(1);
  release.add_sequence_ids(12345);
  v1::ReleaseResponse released;
  ASSERT_TRUE(target_->DoRelease(release, &released).ok());
  EXPECT_EQ(released.released(), 1u);
  ASSERT_TRUE(target_->DoRelease(release, &released).ok());
  EXPECT_EQ(released.released(), 0u);
}

TEST_F(WorkerServiceTest, DescribeReportsTheModelAndLimits) {
  v1::DescribeResponse d;
  ASSERT_TRUE(target_->DoDescribe(&d).ok());
  EXPECT_EQ(d.role(), v1::WORKER_ROLE_TARGET);
  EXPECT_EQ(d.model().vocab_size(), static_cast<uint32_t>(kVocab));
  EXPECT_EQ(d.model().name(), "tiny");
  EXPECT_EQ(d.tp_size(), 1u);
  EXPECT_EQ(d.collective_backend(), "local");
  EXPECT_EQ(d.max_batch_tokens(), static_cast<uint32_t>(kMaxBatchTokens));
  EXPECT_EQ(d.max_speculative_tokens(), static_cast<uint32_t>(kMaxK));
  EXPECT_EQ(d.context_length(), 256u);
  EXPECT_EQ(d.lease_timeout_ms(), 30000u);
  EXPECT_EQ(d.kv_block_size(), 8u);
  EXPECT_GT(d.kv_total_blocks(), 0u);
  EXPECT_EQ(d.instance_id(), target_->instance_id());
  v1::DescribeResponse dd;
  ASSERT_TRUE(draft_->DoDescribe(&dd).ok());
  EXPECT_EQ(dd.role(), v1::WORKER_ROLE_DRAFT);
}

}  // namespace
}  // namespace worker
}  // namespace tandem
