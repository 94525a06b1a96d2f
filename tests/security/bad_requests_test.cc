#include "tests/security/bad_requests.h"

#include <gtest/gtest.h>

#include <set>

namespace tandem::security {
namespace {

TEST(BadRequestsTest, PublicCasesHaveDistinctNamesOneControlAndChangeTheRequest) {
  const std::vector<PublicCase> cases = PublicCases();
  ASSERT_GE(cases.size(), 30u);
  std::set<std::string> names;
  int controls = 0;
  for (const PublicCase& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    v1::GenerateRequest base;
    base.set_text("def add(a, b):");
    base.set_max_new_tokens(4);
    v1::GenerateRequest edited = base;
    c.edit(edited);
    if (c.code == grpc::OK) {
      ++controls;
      continue;
    }
    EXPECT_NE(edited.SerializeAsString(), base.SerializeAsString()) << c.name;
  }
  EXPECT_EQ(controls, 1);
}

TEST(BadRequestsTest, WorkerCasesCoverEveryProtocolStatus) {
  const WorkerApiCases cases = WorkerCases();
  std::set<grpc::StatusCode> target_codes, draft_codes;
  for (const WorkerCase& c : cases.target) target_codes.insert(c.code);
  for (const WorkerCase& c : cases.draft) draft_codes.insert(c.code);
  for (grpc::StatusCode code : {grpc::OK, grpc::INVALID_ARGUMENT, grpc::NOT_FOUND,
                                grpc::RESOURCE_EXHAUSTED, grpc::FAILED_PRECONDITION}) {
    EXPECT_EQ(target_codes.count(code), 1u) << code;
  }
  // Nothing the worker serves is unimplemented any more (trees take every rule).
  EXPECT_EQ(target_codes.count(grpc::UNIMPLEMENTED), 0u);
  EXPECT_EQ(draft_codes.count(grpc::FAILED_PRECONDITION), 1u);
  EXPECT_EQ(draft_codes.count(grpc::NOT_FOUND), 1u);
}

TEST(BadRequestsTest, BuildersFillOneGreedySequence) {
  const v1::VerifyRequest v = VerifyOf(5, 3, {1, 2}, {Proposal(9)});
  ASSERT_EQ(v.sequences_size(), 1);
  EXPECT_EQ(v.sequences(0).sequence_id(), 5u);
  EXPECT_EQ(v.sequences(0).start_position(), 3u);
  EXPECT_EQ(v.sequences(0).tokens_size(), 2);
  ASSERT_EQ(v.sequences(0).proposals_size(), 1);
  EXPECT_EQ(v.sequences(0).proposals(0).token(), 9);
  EXPECT_EQ(v.sequences(0).proposals(0).q_probs(0), 1.0f);
  EXPECT_EQ(v.sequences(0).sampling().rule(), v1::ACCEPTANCE_RULE_GREEDY);
  const v1::DraftRequest d = DraftOf(6, 0, {4}, 3);
  EXPECT_EQ(d.sequences(0).num_draft_tokens(), 3);
  const v1::PrefillRequest p = PrefillOf(7, 2, 5);
  EXPECT_EQ(p.sequences(0).tokens_size(), 5);
  EXPECT_EQ(p.sequences(0).tokens(4), 7);
}

}  // namespace
}  // namespace tandem::security
