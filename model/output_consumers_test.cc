// The runtime's ForwardConsumers over hand-built logits on the CPU backend: input
// checks before a forward, and each consumer equal to its host reference.
#include "model/output_consumers.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace tandem {
namespace {

// Two rows of a vocabulary of 4 stored rank-major in 2 parts: row r, token v is
// 10 * r + v.
std::vector<float> RankMajorRows() {
  return {0, 1, 10, 11,   // part 0: rows 0 and 1, tokens 0..1
          2, 3, 12, 13};  // part 1: rows 0 and 1, tokens 2..3
}

TEST(OutputConsumersTest, CheckRowsRejectsMissingOutputsAndRowsPastTheBatch) {
  EXPECT_EQ(HostLogitsConsumer(nullptr).CheckRows(1).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> logits;
  EXPECT_TRUE(HostLogitsConsumer(&logits).CheckRows(0).ok());
  EXPECT_TRUE(NoOpConsumer().CheckRows(3).ok());

  std::vector<VerifyOutcome> outcomes;
  VerifyChain chain;
  chain.first_row = 1;
  chain.proposals.resize(1);  // Rows 1 and 2.
  const VerifyChain chains[] = {chain};
  EXPECT_EQ(VerifyAcceptConsumer(chains, nullptr).CheckRows(3).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(VerifyAcceptConsumer(chains, &outcomes).CheckRows(3).ok());
  EXPECT_EQ(VerifyAcceptConsumer(chains, &outcomes).CheckRows(2).code(),
            absl::StatusCode::kInvalidArgument);

  std::vector<DraftProposal> proposals;
  DraftRow row;
  row.row = 2;
  const DraftRow rows[] = {row};
  EXPECT_EQ(DraftSampleConsumer(rows, nullptr).CheckRows(3).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(DraftSampleConsumer(rows, &proposals).CheckRows(3).ok());
  EXPECT_EQ(DraftSampleConsumer(rows, &proposals).CheckRows(2).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OutputConsumersTest, EachConsumerEqualsItsHostReference) {
  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  const std::vector<float> stored = RankMajorRows();
  ForwardOutputs outputs;
  outputs.logits = LogitsView{stored.data(), 2, 4, 2};
  const std::vector<float> row_major = {0, 1, 2, 3, 10, 11, 12, 13};

  std::vector<float> logits = {42};
  HostLogitsConsumer host(&logits);
  ASSERT_TRUE(host.Consume(*backend, outputs).ok());
  EXPECT_EQ(logits, row_major);

  VerifyChain chain;  // Greedy over rows 0..1: proposing 3 is accepted, bonus 3.
  chain.params.rule = spec::AcceptanceRule::kGreedy;
  chain.proposals.push_back({3, spec::PointMass(3)});
  const VerifyChain chains[] = {chain};
  std::vector<VerifyOutcome> outcomes, want_outcomes;
  VerifyAcceptConsumer accept(chains, &outcomes);
  ASSERT_TRUE(accept.Consume(*backend, outputs).ok());
  ASSERT_TRUE(HostVerifyAccept(row_major, 4, chains, &want_outcomes).ok());
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].committed, want_outcomes[0].committed);
  EXPECT_EQ(outcomes[0].num_accepted, 1);

  DraftRow first, second;
  second.row = 1;
  second.sampling = {0.8f, 0, 1.0f};
  second.seed = 5;
  const DraftRow rows[] = {first, second};
  std::vector<DraftProposal> proposals, want_proposals;
  DraftSampleConsumer sample(rows, &proposals);
  ASSERT_TRUE(sample.Consume(*backend, outputs).ok());
  ASSERT_TRUE(HostSampleDrafts(row_major, 4, rows, &want_proposals).ok());
  ASSERT_EQ(proposals.size(), 2u);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(proposals[d].token, want_proposals[d].token) << d;
    EXPECT_EQ(proposals[d].q.ids, want_proposals[d].q.ids) << d;
    EXPECT_EQ(proposals[d].q.probs, want_proposals[d].q.probs) << d;
  }
  EXPECT_EQ(proposals[0].token, 3);  // Greedy: the argmax of row 0.
  EXPECT_TRUE(NoOpConsumer().Consume(*backend, outputs).ok());
}

}  // namespace
}  // namespace tandem
