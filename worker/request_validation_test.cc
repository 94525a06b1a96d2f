// Validation of worker step requests: a table of bad verify requests, each with the
// status code of the protocol, and the good requests they are made from.
#include "worker/request_validation.h"

#include <gtest/gtest.h>

#include <cmath>
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
constexpr int kContextLength = 256;

RequestLimits Limits() {
  RequestLimits limits;
  limits.vocab_size = kVocab;
  limits.max_batch_tokens = kMaxBatchTokens;
  limits.max_speculative_tokens = kMaxK;
  limits.context_length = kContextLength;
  return limits;
}

// Sequence 1 holds 6 tokens; no other sequence is cached.
absl::StatusOr<int> CachedLength(uint64_t id) {
  if (id == 1) return 6;
  return absl::NotFoundError("not cached");
}

// Sequence 1 continues at position 6 with one token and a chain of two greedy proposals.
v1::VerifyRequest GoodVerify() {
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

struct VerifyCase {
  std::string name;
  std::function<void(v1::VerifyRequest&)> mutate;
  absl::StatusCode code;
};

TEST(ValidateVerifyRequestTest, BadRequestsGetTheirStatusCodes) {
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
    const absl::Status status = ValidateVerifyRequest(request, Limits(), CachedLength);
    EXPECT_EQ(status.code(), c.code) << c.name << ": " << status;
    EXPECT_FALSE(status.message().empty()) << c.name;
  }
}

TEST(ValidateVerifyRequestTest, GoodChainsAndTreesPass) {
  EXPECT_TRUE(ValidateVerifyRequest(GoodVerify(), Limits(), CachedLength).ok());
  // The same proposals as a tree of two siblings under rejection sampling.
  v1::VerifyRequest tree = GoodVerify();
  tree.mutable_sequences(0)->mutable_sampling()->set_temperature(1);
  tree.mutable_sequences(0)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
  tree.mutable_sequences(0)->add_proposal_parents(-1);
  tree.mutable_sequences(0)->add_proposal_parents(-1);
  const absl::Status status = ValidateVerifyRequest(tree, Limits(), CachedLength);
  EXPECT_TRUE(status.ok()) << status;
  // A new sequence starting at 0 is created.
  v1::VerifyRequest fresh = GoodVerify();
  fresh.mutable_sequences(0)->set_sequence_id(5);
  fresh.mutable_sequences(0)->set_start_position(0);
  EXPECT_TRUE(ValidateVerifyRequest(fresh, Limits(), CachedLength).ok());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
