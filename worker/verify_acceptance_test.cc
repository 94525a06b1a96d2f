// The acceptance of a verify step on the backend (VerifyOnBackend) against the spec
// reference run here over the same forward pass's logits copied to the host
// (spec::AcceptProposals for chains, spec::AcceptTree for trees, spec::CommittedLogProb):
// verdicts, accepted paths and log-probabilities for chains and trees under every rule,
// and VerifyBatch lays out the forward pass as documented.
#include "worker/verify_acceptance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/output_consumers.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"
#include "spec/tree_acceptance.h"
#include "worker/sequence_sampling.h"
#include "worker/target_engine.h"
#include "worker/test_util.h"

namespace tandem {
namespace worker {
namespace {

constexpr int kVocab = 128;  // kTpCheckpoint.

TEST(VerifyBatchTest, ChainAndTreeLayout) {
  v1::VerifyRequest request;
  v1::VerifySequence* chain = request.add_sequences();
  chain->set_sequence_id(4);
  chain->set_start_position(7);
  chain->mutable_tokens()->Add(10);
  chain->mutable_tokens()->Add(11);
  for (int32_t t : {20, 21}) *chain->add_proposals() = testing::PointProposal(t);
  v1::VerifySequence* tree = request.add_sequences();
  tree->set_sequence_id(5);
  tree->mutable_tokens()->Add(12);
  for (int32_t t : {30, 31, 32}) *tree->add_proposals() = testing::PointProposal(t);
  for (int32_t p : {-1, -1, 0}) tree->add_proposal_parents(p);

  const std::vector<SequenceInput> batch = VerifyBatch(request);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].seq_id, 4u);
  EXPECT_EQ(batch[0].start_position, 7);
  EXPECT_EQ(batch[0].tokens, (std::vector<int32_t>{10, 11, 20, 21}));
  EXPECT_EQ(batch[0].logit_indices, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(batch[0].parents.empty());
  EXPECT_EQ(batch[1].tokens, (std::vector<int32_t>{12, 30, 31, 32}));
  EXPECT_EQ(batch[1].logit_indices, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(batch[1].parents, (std::vector<int32_t>{-1, 0, 0, 1}));
}

class VerifyAcceptanceTest : public ::testing::Test {
 protected:
  static constexpr int kSequences = 7;

  void SetUp() override {
    for (testing::TestExecutor* executor : {&on_backend_, &on_host_}) {
      auto loaded = testing::LoadTestExecutor(testing::kTpCheckpoint);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      *executor = *std::move(loaded);
    }
    auto reference = testing::LoadTestModel(testing::kTpCheckpoint);
    ASSERT_TRUE(reference.ok()) << reference.status();
    prompt_ = testing::Tokens(11, kVocab, 21);
    greedy_ = testing::GreedyContinuation(*reference->model, prompt_, 5);
    std::vector<int32_t> all = prompt_;
    all.insert(all.end(), greedy_.begin(), greedy_.end());
    target_logits_ = testing::DecodeLogits(*reference->model, all);
    ASSERT_EQ(target_logits_.size(), all.size());

    v1::PrefillRequest prefill;
    for (int id = 1; id <= kSequences; ++id) {
      v1::PrefillSequence* s = prefill.add_sequences();
      s->set_sequence_id(id);
      s->mutable_tokens()->Assign(prompt_.begin(), prompt_.end() - 1);
    }
    for (testing::TestExecutor* executor : {&on_backend_, &on_host_}) {
      ASSERT_TRUE(RunPrefill(executor->executor.get(), prefill).ok());
    }
  }

  // A chain after the prompt: K proposals along the greedy continuation, except that
  // proposal `wrong` (if < K) is another token of its q. q is the top-8 of the
  // target's distribution on the greedy context (the point mass for greedy), so
  // proposals are often accepted.
  v1::VerifySequence Chain(uint64_t id, int k, int wrong, const v1::SequenceSampling& sampling,
                           uint32_t sample_index) const {
    v1::VerifySequence seq;
    seq.set_sequence_id(id);
    seq.set_start_position(prompt_.size() - 1);
    seq.add_tokens(prompt_.back());
    seq.set_sample_index(sample_index);
    *seq.mutable_sampling() = sampling;
    std::vector<float> probs;
    for (int i = 0; i < k; ++i) {
      v1::ProposedToken* p = seq.add_proposals();
      if (IsGreedy(sampling)) {
        *p = testing::PointProposal(i == wrong ? (greedy_[i] + 1) % kVocab : greedy_[i]);
        continue;
      }
      spec::ProcessLogits(target_logits_[prompt_.size() - 1 + i], ToSamplingConfig(sampling),
                          &probs);
      const spec::SparseDistribution q = spec::TopKSparse(probs, 8);
      p->mutable_q_ids()->Assign(q.ids.begin(), q.ids.end());
      p->mutable_q_probs()->Assign(q.probs.begin(), q.probs.end());
      p->set_token(i == wrong ? q.ids[q.ids.size() > 1 ? 1 : 0] : q.ids[0]);
    }
    return seq;
  }

  // A tree after the prompt along the greedy continuation: at depth d (0-based) the
  // spine node (greedy_[d], parent the spine node above) and an alternative sibling,
  // spine first at even depths, alternative first at odd ones; 2 * depth nodes. q as
  // Chain's, each later sibling's without the earlier sibling's token (drawn without
  // replacement, spec/tree_acceptance.h); point masses under greedy.
  v1::VerifySequence Tree(uint64_t id, int depth, const v1::SequenceSampling& sampling,
                          uint32_t sample_index) const {
    v1::VerifySequence seq = Chain(id, 0, 0, sampling, sample_index);
    std::vector<float> probs;
    int spine = -1;
    for (int d = 0; d < depth; ++d) {
      spec::SparseDistribution q = spec::PointMass(greedy_[d]);
      int32_t alt = (greedy_[d] + 1) % kVocab;
      if (!IsGreedy(sampling)) {
        spec::ProcessLogits(target_logits_[prompt_.size() - 1 + d], ToSamplingConfig(sampling),
                            &probs);
        q = spec::TopKSparse(probs, 8);
        for (int32_t t : q.ids) {
          if (t != greedy_[d]) {
            alt = t;
            break;
          }
        }
      }
      const bool spine_first = d % 2 == 0;
      const int32_t first = spine_first ? greedy_[d] : alt, second = spine_first ? alt : greedy_[d];
      for (int32_t token : {first, second}) {
        v1::ProposedToken* p = seq.add_proposals();
        p->set_token(token);
        const spec::SparseDistribution node_q =
            IsGreedy(sampling) ? spec::PointMass(token) : (token == first ? q : Without(q, first));
        p->mutable_q_ids()->Assign(node_q.ids.begin(), node_q.ids.end());
        p->mutable_q_probs()->Assign(node_q.probs.begin(), node_q.probs.end());
        seq.add_proposal_parents(spine);
      }
      spine = 2 * d + (spine_first ? 0 : 1);
    }
    return seq;
  }

  // q without `token`, renormalised; a point mass at another token when nothing is left.
  static spec::SparseDistribution Without(const spec::SparseDistribution& q, int32_t token) {
    spec::SparseDistribution out = spec::SparseWithout(q, token);
    return out.ids.empty() ? spec::PointMass((token + 1) % kVocab) : out;
  }

  // The spec reference of one sequence over its K + 1 host logit rows.
  static absl::StatusOr<Verdict> Reference(const v1::VerifySequence& seq,
                                           absl::Span<const float> rows) {
    absl::StatusOr<spec::AcceptanceParams> params = ToAcceptanceParams(seq.sampling());
    if (!params.ok()) return params.status();
    const int k = seq.proposals_size();
    std::vector<std::vector<float>> probs(k + 1);
    std::vector<absl::Span<const float>> spans;
    const auto row = [&](int i) { return rows.subspan(size_t(i) * kVocab, kVocab); };
    for (int i = 0; i <= k; ++i) {
      spec::ProcessLogits(row(i), ToSamplingConfig(seq.sampling()), &probs[i]);
      spans.push_back(probs[i]);
    }
    std::vector<spec::Proposal> proposals;
    for (const v1::ProposedToken& p : seq.proposals()) proposals.push_back(ToProposal(p));
    const spec::RandomKey key{seq.sampling().seed(), seq.sample_index(),
                              uint64_t{seq.start_position()} + uint64_t(seq.tokens_size())};
    Verdict verdict;
    if (seq.proposal_parents_size() == 0) {
      absl::StatusOr<spec::AcceptanceResult> r =
          spec::AcceptProposals(proposals, spans, *params, key);
      if (!r.ok()) return r.status();
      verdict.committed = r->committed;
      for (int j = 0; j < r->num_accepted; ++j) verdict.accepted.push_back(j);
    } else {
      const std::vector<int32_t> parents(seq.proposal_parents().begin(),
                                         seq.proposal_parents().end());
      absl::StatusOr<spec::TreeAcceptanceResult> r =
          spec::AcceptTree(parents, proposals, spans, *params, key);
      if (!r.ok()) return r.status();
      verdict.committed = r->committed;
      verdict.accepted = r->path;
    }
    if (!seq.sampling().return_logprobs()) return verdict;
    for (size_t j = 0; j < verdict.committed.size(); ++j) {
      const int r = j == 0 ? 0 : verdict.accepted[j - 1] + 1;  // A chain's node j - 1: row j.
      verdict.logprobs.push_back(static_cast<float>(spec::CommittedLogProb(
          row(r), probs[r], verdict.committed[j], IsGreedy(seq.sampling()))));
    }
    return verdict;
  }

  // Runs `request` on the backend and, on the second executor, the same forward with the
  // logits copied to the host and the spec reference over them; checks that they agree
  // and that each sequence's cache holds its fed tokens. Returns the backend's verdicts.
  Verdicts RunBoth(const v1::VerifyRequest& request) {
    const std::vector<SequenceInput> batch = VerifyBatch(request);
    Verdicts backend, host;
    absl::Status status = VerifyOnBackend(on_backend_.executor.get(), request, batch, &backend);
    EXPECT_TRUE(status.ok()) << status;
    std::vector<float> logits;
    HostLogitsConsumer copy(&logits);
    status = on_host_.executor->Forward(batch, copy);
    EXPECT_TRUE(status.ok()) << status;
    size_t first_row = 0;
    for (const v1::VerifySequence& seq : request.sequences()) {
      const size_t rows = seq.proposals_size() + 1;
      host.push_back(
          Reference(seq, absl::MakeConstSpan(logits).subspan(first_row * kVocab, rows * kVocab)));
      first_row += rows;
      if (!host.back().ok()) break;
    }
    EXPECT_EQ(backend.size(), host.size());
    for (size_t s = 0; s < std::min(backend.size(), host.size()); ++s) {
      SCOPED_TRACE("sequence " + std::to_string(request.sequences(s).sequence_id()));
      EXPECT_EQ(backend[s].status(), host[s].status());
      if (!backend[s].ok() || !host[s].ok()) continue;
      EXPECT_EQ(backend[s]->committed, host[s]->committed);
      EXPECT_EQ(backend[s]->accepted, host[s]->accepted);
      EXPECT_EQ(backend[s]->logprobs, host[s]->logprobs);
    }
    for (const SequenceInput& in : batch) {
      const int fed = in.start_position + static_cast<int>(in.tokens.size());
      EXPECT_EQ(on_backend_.executor->CachedLength(in.seq_id).value_or(-1), fed);
      EXPECT_EQ(on_host_.executor->CachedLength(in.seq_id).value_or(-1), fed);
    }
    return backend;
  }

  testing::TestExecutor on_backend_, on_host_;
  std::vector<int32_t> prompt_, greedy_;
  std::vector<std::vector<float>> target_logits_;
};

TEST_F(VerifyAcceptanceTest, ChainsMatchTheReferenceForEveryRule) {
  using testing::Sampled;
  const v1::SequenceSampling samplings[kSequences] = {
      testing::Greedy(true),
      Sampled(1.0f, 5, v1::ACCEPTANCE_RULE_REJECTION, 0, 1.0f, true),
      Sampled(0.8f, 6, v1::ACCEPTANCE_RULE_REJECTION, 12, 0.9f, false),
      Sampled(0.7f, 7, v1::ACCEPTANCE_RULE_THRESHOLD, 0, 1.0f, true),
      Sampled(1.1f, 8, v1::ACCEPTANCE_RULE_RATIO, 0, 0.8f, false),
      Sampled(0.9f, 9, v1::ACCEPTANCE_RULE_POSITION, 20, 1.0f, true),
      Sampled(1.0f, 10, v1::ACCEPTANCE_RULE_TYPICAL, 0, 1.0f, true),
  };
  int accepted = 0, rejected = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    v1::VerifyRequest request;
    for (int s = 0; s < kSequences; ++s) {
      const int k = (round + s) % 5;
      *request.add_sequences() = Chain(s + 1, k, (3 * round + s) % 6, samplings[s], round);
    }
    const Verdicts verdicts = RunBoth(request);
    ASSERT_EQ(verdicts.size(), size_t(kSequences));
    for (int s = 0; s < kSequences; ++s) {
      ASSERT_TRUE(verdicts[s].ok()) << verdicts[s].status();
      const Verdict& v = *verdicts[s];
      const int k = request.sequences(s).proposals_size();
      EXPECT_EQ(v.committed.size(), v.accepted.size() + 1);
      EXPECT_EQ(v.logprobs.size(),
                request.sequences(s).sampling().return_logprobs() ? v.committed.size() : 0u);
      accepted += static_cast<int>(v.accepted.size());
      rejected += k - static_cast<int>(v.accepted.size());
    }
  }
  EXPECT_GT(accepted, 20);
  EXPECT_GT(rejected, 10);
}

// Trees on the backend give spec::AcceptTree's verdicts for every rule, in batches that
// mix them with chains; accepted paths go through later siblings and two levels deep.
TEST_F(VerifyAcceptanceTest, TreesMatchSpecAcceptTreeForEveryRule) {
  using testing::Sampled;
  const v1::SequenceSampling samplings[kSequences] = {
      testing::Greedy(true),
      Sampled(1.0f, 5, v1::ACCEPTANCE_RULE_REJECTION, 0, 1.0f, true),
      Sampled(0.8f, 6, v1::ACCEPTANCE_RULE_COUPLED, 12, 0.9f, true),
      Sampled(0.7f, 7, v1::ACCEPTANCE_RULE_THRESHOLD, 0, 1.0f, true),
      Sampled(1.1f, 8, v1::ACCEPTANCE_RULE_RATIO, 0, 0.8f, false),
      Sampled(0.9f, 9, v1::ACCEPTANCE_RULE_POSITION, 20, 1.0f, true),
      Sampled(1.0f, 10, v1::ACCEPTANCE_RULE_TYPICAL, 0, 1.0f, true),
  };
  int deep = 0, later_sibling = 0, refused = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    v1::VerifyRequest request;
    for (int s = 0; s < kSequences; ++s) {
      *request.add_sequences() = (round + s) % 3 == 0
                                     ? Chain(s + 1, 2, round % 2, samplings[s], round)
                                     : Tree(s + 1, 1 + (round + s) % 4, samplings[s], round);
    }
    const Verdicts verdicts = RunBoth(request);
    ASSERT_EQ(verdicts.size(), size_t(kSequences));
    for (int s = 0; s < kSequences; ++s) {
      ASSERT_TRUE(verdicts[s].ok()) << verdicts[s].status();
      const v1::VerifySequence& seq = request.sequences(s);
      if (seq.proposal_parents_size() == 0) continue;
      const Verdict& v = *verdicts[s];
      deep += v.accepted.size() >= 2;
      refused += v.accepted.size() < size_t(seq.proposals_size() / 2);
      for (int node : v.accepted) later_sibling += node % 2 == 1;
    }
  }
  EXPECT_GT(deep, 5);
  EXPECT_GT(refused, 5);
  EXPECT_GT(later_sibling, 0);  // A second sibling (odd index) accepted.
}

// The coupled rule commits, at every position, the Gumbel-max token of the target's
// processed distribution keyed by the token's absolute position (start_position +
// tokens fed); proposals are accepted iff they equal it.
TEST_F(VerifyAcceptanceTest, CoupledCommitsTheGumbelTokenOfEachAbsolutePosition) {
  int accepted = 0, rejected = 0;
  for (int round = 0; round < 4; ++round) {
    v1::VerifyRequest request;
    for (int s = 0; s < kSequences; ++s) {
      const v1::SequenceSampling sampling =
          testing::Sampled(s % 2 ? 0.7f : 1.0f, 100 * round + s, v1::ACCEPTANCE_RULE_COUPLED,
                           s % 3 ? 0 : 16, s % 2 ? 0.9f : 1.0f, s % 2 == 0);
      // sample_index does not key the coupled rule: any value gives the same tokens.
      *request.add_sequences() = Chain(s + 1, 1 + (round + s) % 5, 9, sampling, 1000 * round);
    }
    const Verdicts verdicts = RunBoth(request);
    ASSERT_EQ(verdicts.size(), size_t(kSequences));
    std::vector<float> probs;
    for (int s = 0; s < kSequences; ++s) {
      ASSERT_TRUE(verdicts[s].ok()) << verdicts[s].status();
      const v1::VerifySequence& seq = request.sequences(s);
      const Verdict& v = *verdicts[s];
      for (size_t j = 0; j < v.committed.size(); ++j) {
        // Accepted proposals follow the greedy continuation, so row j's context is
        // prompt + greedy[0..j).
        spec::ProcessLogits(target_logits_[prompt_.size() - 1 + j],
                            ToSamplingConfig(seq.sampling()), &probs);
        EXPECT_EQ(v.committed[j],
                  spec::GumbelSample(probs, seq.sampling().seed(), prompt_.size() + j))
            << "sequence " << s << " token " << j;
        if (j < v.accepted.size()) {
          EXPECT_EQ(v.committed[j], seq.proposals(j).token());
        }
      }
      if (v.accepted.size() < size_t(seq.proposals_size())) {
        EXPECT_NE(v.committed.back(), seq.proposals(v.accepted.size()).token());
      }
      accepted += static_cast<int>(v.accepted.size());
      rejected += seq.proposals_size() - static_cast<int>(v.accepted.size());
    }
  }
  EXPECT_GT(accepted, 5);
  EXPECT_GT(rejected, 5);
}

// A sequence whose rule parameters are invalid ends the verdicts, after the sequences
// before it, as in the reference; the forward still covers the whole batch.
TEST_F(VerifyAcceptanceTest, InvalidRuleParametersEndTheVerdictsAlike) {
  v1::SequenceSampling unresolved = testing::Sampled(1.0f, 3);
  unresolved.set_rule(v1::ACCEPTANCE_RULE_DEFAULT);
  v1::VerifyRequest request;
  *request.add_sequences() = Chain(1, 2, 5, testing::Greedy(), 0);
  *request.add_sequences() = Chain(2, 3, 1, testing::Sampled(1.0f, 4), 0);
  *request.add_sequences() = Chain(3, 1, 5, unresolved, 0);
  *request.add_sequences() = Chain(4, 2, 5, testing::Greedy(), 0);
  const Verdicts verdicts = RunBoth(request);
  ASSERT_EQ(verdicts.size(), 3u);
  EXPECT_TRUE(verdicts[0].ok());
  EXPECT_TRUE(verdicts[1].ok());
  EXPECT_EQ(verdicts[2].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(verdicts[2].status(), ToAcceptanceParams(unresolved).status());
}

}  // namespace
}  // namespace worker
}  // namespace tandem
