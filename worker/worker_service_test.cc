// WorkerService: table-driven bad requests with their status codes, role checks,
// leases, stats and the restart rules of unknown sequences.
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

struct VerifyCase {
  std::string name;
  std::function<void(v1::VerifyRequest&)> mutate;
  absl::StatusCode code;
};

TEST_F(WorkerServiceTest, BadVerifyRequestsGetTheirStatusCodes) {
  const auto seq = [](v1::VerifyRequest& r) { return r.mutable_sequences(0); };
  const std::vector<VerifyCase> cases = {
      {"no sequences", [](v1::VerifyRequest& r) { r.clear_sequences(); },
       absl::StatusCode::kInvalidArgument},
      {"empty tokens", [&](v1::VerifyRequest& r) { seq(r)->clear_tokens(); },
       absl::StatusCode::kInvalidArgument},
      {"token past vocab", [&](v1::VerifyRequest& r) { seq(r)->set_tokens(0, kVocab); },
       absl::StatusCode::kInvalidArgument},
      {"negative token", [&](v1::VerifyRequest& r) { seq(r)->set_tokens(0, -1); },
       absl::StatusCode::kInvalidArgument},
      {"start past cached", [&](v1::VerifyRequest& r) { seq(r)->set_start_position(7); },
       absl::StatusCode::kInvalidArgument},
      {"unknown id at start > 0", [&](v1::VerifyRequest& r) { seq(r)->set_sequence_id(99); },
       absl::StatusCode::kNotFound},
      {"duplicate ids", [&](v1::VerifyRequest& r) { *r.add_sequences() = r.sequences(0); },
       absl::StatusCode::kInvalidArgument},
      {"K over max",
       [&](v1::VerifyRequest& r) {
         for (int i = 0; i < kMaxK; ++i) *seq(r)->add_proposals() = PointProposal(1);
       },
       absl::StatusCode::kInvalidArgument},
      {"proposal past vocab",
       [&](v1::VerifyRequest& r) { *seq(r)->mutable_proposals(0) = PointProposal(kVocab); },
       absl::StatusCode::kInvalidArgument},
      {"q ids/probs length mismatch",
       [&](v1::VerifyRequest& r) { seq(r)->mutable_proposals(0)->add_q_ids(7); },
       absl::StatusCode::kInvalidArgument},
      {"q empty",
       [&](v1::VerifyRequest& r) {
         seq(r)->mutable_proposals(0)->clear_q_ids();
         seq(r)->mutable_proposals(0)->clear_q_probs();
       },
       absl::StatusCode::kInvalidArgument},
      {"q does not sum to 1",
       [&](v1::VerifyRequest& r) { seq(r)->mutable_proposals(0)->set_q_probs(0, 0.5f); },
       absl::StatusCode::kInvalidArgument},
      {"q negative",
       [&](v1::VerifyRequest& r) {
         auto* p = seq(r)->mutable_proposals(0);
         p->set_q_probs(0, 1.5f);
         p->add_q_ids(9);
         p->add_q_probs(-0.5f);
       },
       absl::StatusCode::kInvalidArgument},
      {"q NaN", [&](v1::VerifyRequest& r) { seq(r)->mutable_proposals(0)->set_q_probs(0, NAN); },
       absl::StatusCode::kInvalidArgument},
      {"token not in q",
       [&](v1::VerifyRequest& r) { seq(r)->mutable_proposals(0)->set_q_ids(0, 7); },
       absl::StatusCode::kInvalidArgument},
      {"q duplicate ids",
       [&](v1::VerifyRequest& r) {
         auto* p = seq(r)->mutable_proposals(0);
         p->set_q_probs(0, 0.5f);
         p->add_q_ids(p->token());
         p->add_q_probs(0.5f);
       },
       absl::StatusCode::kInvalidArgument},
      {"temperature negative",
       [&](v1::VerifyRequest& r) {
         seq(r)->mutable_sampling()->set_temperature(-1);
         seq(r)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
       },
       absl::StatusCode::kInvalidArgument},
      {"temperature over 100",
       [&](v1::VerifyRequest& r) {
         seq(r)->mutable_sampling()->set_temperature(101);
         seq(r)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
       },
       absl::StatusCode::kInvalidArgument},
      {"top_p over 1", [&](v1::VerifyRequest& r) { seq(r)->mutable_sampling()->set_top_p(1.5f); },
       absl::StatusCode::kInvalidArgument},
      {"top_k negative", [&](v1::VerifyRequest& r) { seq(r)->mutable_sampling()->set_top_k(-2); },
       absl::StatusCode::kInvalidArgument},
      {"rule unresolved",
       [&](v1::VerifyRequest& r) {
         seq(r)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_DEFAULT);
       },
       absl::StatusCode::kInvalidArgument},
      {"greedy rule with temperature",
       [&](v1::VerifyRequest& r) { seq(r)->mutable_sampling()->set_temperature(0.5f); },
       absl::StatusCode::kInvalidArgument},
      {"threshold alpha out of range",
       [&](v1::VerifyRequest& r) {
         seq(r)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_THRESHOLD);
         seq(r)->mutable_sampling()->set_alpha(1.5f);
       },
       absl::StatusCode::kInvalidArgument},
      {"parents count mismatch", [&](v1::VerifyRequest& r) { seq(r)->add_proposal_parents(-1); },
       absl::StatusCode::kInvalidArgument},
      {"parent not earlier",
       [&](v1::VerifyRequest& r) {
         seq(r)->add_proposal_parents(-1);
         seq(r)->add_proposal_parents(1);
       },
       absl::StatusCode::kInvalidArgument},
      {"tree siblings with one token",
       [&](v1::VerifyRequest& r) {
         *seq(r)->mutable_proposals(1) = PointProposal(6);
         seq(r)->add_proposal_parents(-1);
         seq(r)->add_proposal_parents(-1);
       },
       absl::StatusCode::kInvalidArgument},
      {"tree sibling q covering an earlier sibling under rejection",
       [&](v1::VerifyRequest& r) {
         seq(r)->mutable_sampling()->set_temperature(1);
         seq(r)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
         auto* p = seq(r)->mutable_proposals(1);
         p->set_q_probs(0, 0.5f);
         p->add_q_ids(6);
         p->add_q_probs(0.5f);
         seq(r)->add_proposal_parents(-1);
         seq(r)->add_proposal_parents(-1);
       },
       absl::StatusCode::kInvalidArgument},
      {"past the context length",
       [&](v1::VerifyRequest& r) {
         v1::VerifySequence* s = r.add_sequences();
         s->set_sequence_id(2);
         for (int i = 0; i < 255; ++i) s->add_tokens(1);
         *s->add_proposals() = PointProposal(1);
         *s->add_proposals() = PointProposal(1);
         *s->mutable_sampling() = Greedy();
       },
       absl::StatusCode::kInvalidArgument},
      {"batch over max_batch_tokens",
       [&](v1::VerifyRequest& r) {
         for (int i = 0; i < kMaxBatchTokens; ++i) seq(r)->add_tokens(1);
       },
       absl::StatusCode::kResourceExhausted},
  };
  for (const VerifyCase& c : cases) {
    v1::VerifyRequest request = GoodVerify();
    c.mutate(request);
    v1::VerifyResponse response;
    absl::Status status = target_->DoVerify(request, &response);
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
    EXPECT_FALSE(status.message().empty()) << c.name;
  }
  // Nothing above changed the cache, and the unmodified request still works, as does
  // the same proposals as a tree of two siblings under rejection sampling.
  EXPECT_EQ(*target_model_.executor->CachedLength(1), 6);
  v1::VerifyResponse response;
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
