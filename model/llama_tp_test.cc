// Tensor parallel in one process: tp = 2 and 4 ranks (one thread and one CPU backend
// each, joined by the in-process LocalGroup communicator) give the tp = 1 logits
// within float32 rounding, identical logits on every rank, and bitwise identical
// results run to run. the acceptance consumer (tp 1 and 2) equals host logits + HostVerifyAccept
// and the draft-sampling consumer equals host logits + HostSampleDrafts.
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "comm/local_communicator.h"
#include "gtest/gtest.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/verify_accept.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/llama.h"
#include "model/llama_test_util.h"
#include "model/output_consumers.h"
#include "model/weights.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"

namespace tandem {
namespace {

// Every dimension of this checkpoint divides by 2 and 4 (8 heads, 4 KV heads,
// intermediate 64, vocab 128).
constexpr char kCheckpoint[] = "tests/reference/checkpoints/tiny_f32_tp";

// Sharding changes only the order of float32 additions (row-parallel partial sums
// are added rank by rank), so tp > 1 and tp = 1 differ by rounding: a few ulps of
// O(1) values after 2 layers, far below 1e-4. A real sharding error (wrong slice,
// missing reduction) changes logits by O(0.1).
constexpr double kAbsTol = 1e-4;
constexpr double kRelTol = 1e-4;

// A serving-like scenario on one rank: mixed prefill, verify chunks, rollback, a tree
// with KeepPath and decode. Returns all logits concatenated, or an error.
absl::StatusOr<std::vector<float>> RunScenario(const LlamaWeights& weights, Communicator* comm) {
  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  LlamaModelOptions options;
  options.block_size = 8;
  options.max_batch_tokens = 128;
  options.kv_cache_bytes = size_t(2) << 20;
  auto model_or = LlamaModel::Create(weights, backend.get(), comm, options);
  if (!model_or.ok()) return model_or.status();
  LlamaModel& model = **model_or;
  const int vocab = weights.config.vocab_size;
  const std::vector<int32_t> a = RandomTokens(40, vocab, 1), b = RandomTokens(40, vocab, 2);

  std::vector<float> all, logits;
  const auto step = [&](const std::vector<SequenceInput>& batch) -> absl::Status {
    absl::Status status = ForwardToHost(model, batch, &logits);
    all.insert(all.end(), logits.begin(), logits.end());
    return status;
  };
  const auto slice = [](const std::vector<int32_t>& v, int begin, int end) {
    return std::vector<int32_t>(v.begin() + begin, v.begin() + end);
  };
  absl::Status status =
      step({Seq(1, 0, slice(a, 0, 20), {19}), Seq(2, 0, slice(b, 0, 7), {0, 1, 2, 3, 4, 5, 6})});
  if (status.ok()) {
    status = step({Seq(1, 20, slice(a, 20, 25), {0, 1, 2, 3, 4}), Seq(2, 7, {b[7]}, {0})});
  }
  if (status.ok()) {  // Roll sequence 1 back by 3; a tree on sequence 2.
    status = step({Seq(1, 22, slice(a, 30, 32), {0, 1}),
                   Seq(2, 8, slice(b, 8, 12), {0, 1, 2, 3}, {-1, 0, 0, 1})});
  }
  if (status.ok()) status = model.KeepPath(2, 8, {0, 1, 3});
  if (status.ok()) status = step({Seq(2, 11, {b[20]}, {0}), Seq(1, 24, {a[33]}, {0})});
  if (!status.ok()) return status;
  return all;
}

// Runs `run(weights of rank r, communicator or nullptr at tp 1)` on `tp` ranks, one thread
// each, over `checkpoint`; returns each rank's result (failures are reported).
template <typename T, typename Run>
std::vector<T> RunOnRanks(int tp, const char* checkpoint, Run run) {
  std::vector<T> results(tp);
  auto group = LocalGroup::Create(tp);
  EXPECT_TRUE(group.ok()) << group.status();
  if (!group.ok()) return {};
  std::vector<absl::Status> statuses(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      auto weights = LoadLlamaWeights(checkpoint, r, tp);
      if (!weights.ok()) {
        statuses[r] = weights.status();
        return;
      }
      absl::StatusOr<T> result = run(*weights, tp > 1 ? (*group)[r].get() : nullptr);
      statuses[r] = result.status();
      if (result.ok()) results[r] = *std::move(result);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < tp; ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  return results;
}

// Runs the scenario on `tp` ranks; returns each rank's logits.
std::vector<std::vector<float>> RunTensorParallel(int tp, const char* checkpoint = kCheckpoint) {
  return RunOnRanks<std::vector<float>>(
      tp, checkpoint,
      [](const LlamaWeights& w, Communicator* comm) { return RunScenario(w, comm); });
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(LlamaTensorParallelTest, MatchesSingleRankAndIsDeterministic) {
  const std::vector<std::vector<float>> single = RunTensorParallel(1);
  ASSERT_EQ(single.size(), 1u);
  // 1 + 7 + 5 + 1 + 2 + 4 + 2 logit rows of 128.
  ASSERT_EQ(single[0].size(), size_t(22 * 128));
  for (int tp : {2, 4}) {
    SCOPED_TRACE("tp = " + std::to_string(tp));
    const std::vector<std::vector<float>> first = RunTensorParallel(tp);
    const std::vector<std::vector<float>> second = RunTensorParallel(tp);
    ASSERT_EQ(first.size(), size_t(tp));
    ASSERT_EQ(second.size(), size_t(tp));
    for (int r = 0; r < tp; ++r) {
      EXPECT_TRUE(BitwiseEqual(first[r], first[0])) << "rank " << r << " differs from rank 0";
      EXPECT_TRUE(BitwiseEqual(second[r], first[r])) << "rank " << r << " not reproducible";
    }
    ASSERT_EQ(first[0].size(), single[0].size());
    double max_err = 0;
    for (size_t i = 0; i < single[0].size(); ++i) {
      const double want = single[0][i], got = first[0][i];
      max_err = std::max(max_err, std::abs(got - want));
      ASSERT_LE(std::abs(got - want), kAbsTol + kRelTol * std::abs(want))
          << "element " << i << " (logit row " << i / 128 << ")";
    }
    RecordProperty("max_err_tp" + std::to_string(tp), std::to_string(max_err));
  }
}

// More ranks than KV heads: each rank holds one replicated KV head (4 heads, 2 KV
// heads, tp = 4) and the result still equals one rank's.
TEST(LlamaTensorParallelTest, ReplicatedKvHeadsMatchSingleRank) {
  constexpr char kTwoKvHeads[] = "tests/reference/checkpoints/tiny_bf16_llama3_tied";
  const std::vector<std::vector<float>> single = RunTensorParallel(1, kTwoKvHeads);
  const std::vector<std::vector<float>> four = RunTensorParallel(4, kTwoKvHeads);
  ASSERT_EQ(single.size(), 1u);
  ASSERT_EQ(four.size(), 4u);
  ASSERT_EQ(four[0].size(), single[0].size());
  ASSERT_GT(single[0].size(), 0u);
  for (size_t i = 0; i < single[0].size(); ++i) {
    const double want = single[0][i], got = four[0][i];
    ASSERT_LE(std::abs(got - want), kAbsTol + kRelTol * std::abs(want)) << "element " << i;
  }
}

// ------------------------------------------------ acceptance and draft-sampling consumers

// The call rank 0 makes for the verify step below (other ranks: Forward).
enum class StepCall { kForward, kAccept, kSampleDrafts };

// What one rank saw of a verify step run with host logits, acceptance or draft
// sampling.
struct VerifyStepResult {
  std::vector<float> logits;             // The verify step's logits (Forward).
  std::vector<VerifyOutcome> outcomes;   // VerifyAcceptConsumer.
  std::vector<DraftProposal> proposals;  // DraftSampleConsumer.
  std::vector<int> cached;               // Cached lengths of sequences 1..3 afterwards.
  std::vector<float> next;               // Logits of the step after it.
};

// Three chains over the 7 logit rows of the verify step below: sequence 1's rows 0..3
// (rejection sampling, K = 3, with logprobs), sequence 2's rows 4..6 (greedy, K = 2,
// with logprobs) and a K = 0 plain sample (threshold rule, top-k) at row 3.
std::vector<VerifyChain> VerifyChains(const std::vector<int32_t>& a,
                                      const std::vector<int32_t>& b) {
  std::vector<VerifyChain> chains(3);
  chains[0].sampling = {0.9f, 0, 1.0f};
  chains[0].key = {11, 12};
  chains[0].want_logprobs = true;
  for (int i = 13; i < 16; ++i) {
    spec::Proposal p;
    p.token = a[i];
    p.q.ids = {a[i], (a[i] + 1) % 128};
    p.q.probs = {0.25f, 0.75f};
    chains[0].proposals.push_back(p);
  }
  chains[1].first_row = 4;
  chains[1].params.rule = spec::AcceptanceRule::kGreedy;
  chains[1].want_logprobs = true;
  for (int i : {5, 6}) chains[1].proposals.push_back({b[i], spec::PointMass(b[i])});
  chains[2].first_row = 3;
  chains[2].sampling = {1.0f, 20, 1.0f};
  chains[2].params.rule = spec::AcceptanceRule::kThreshold;
  chains[2].key = {3, 40};
  return chains;
}

// Draft rows over the same 7 logit rows: greedy, sampled plain, with top-k and with
// top-p, q_size 1, 8, 32 and more than the vocabulary, and row 2 drawn twice.
std::vector<DraftRow> DraftRows() {
  const spec::SamplingConfig configs[] = {
      {0.0f, 0, 1.0f}, {0.8f, 0, 1.0f}, {1.2f, 20, 1.0f}, {0.7f, 0, 0.9f}};
  const int q_sizes[] = {32, 1, 8, 200};
  std::vector<DraftRow> drafts(8);
  for (int r = 0; r < 8; ++r) {
    drafts[r].row = r < 7 ? r : 2;
    drafts[r].sampling = configs[r % 4];
    drafts[r].q_size = q_sizes[r % 4];
    drafts[r].seed = 100 + r;
    drafts[r].position = 7 + r;
  }
  return drafts;
}

// Prefills sequences 1 and 2, then runs a verify step (sequence 1 verifies 3 tokens,
// a prefill chunk of sequence 3 rides along, sequence 2 rolls back one token and
// verifies 2) with `call` on rank 0 (the other ranks run Forward, as group followers
// do), then one more decode step.
absl::StatusOr<VerifyStepResult> RunVerifyStep(const LlamaWeights& weights, Communicator* comm,
                                               StepCall call) {
  std::unique_ptr<Backend> backend = MakeCpuBackend(1);
  LlamaModelOptions options;
  options.block_size = 4;
  options.kv_cache_bytes = size_t(1) << 20;
  auto model_or = LlamaModel::Create(weights, backend.get(), comm, options);
  if (!model_or.ok()) return model_or.status();
  LlamaModel& model = **model_or;
  const int vocab = weights.config.vocab_size;
  const std::vector<int32_t> a = RandomTokens(24, vocab, 4), b = RandomTokens(12, vocab, 5),
                             c = RandomTokens(8, vocab, 6);
  const auto slice = [](const std::vector<int32_t>& v, int begin, int end) {
    return std::vector<int32_t>(v.begin() + begin, v.begin() + end);
  };
  VerifyStepResult result;
  absl::Status status = ForwardToHost(
      model, {Seq(1, 0, slice(a, 0, 12), {}), Seq(2, 0, slice(b, 0, 5), {})}, &result.logits);
  if (!status.ok()) return status;
  const std::vector<SequenceInput> verify = {Seq(1, 12, slice(a, 12, 16), {0, 1, 2, 3}),
                                             Seq(3, 0, slice(c, 0, 6), {}),
                                             Seq(2, 4, slice(b, 4, 7), {0, 1, 2})};
  const bool leader = comm == nullptr || comm->rank() == 0;
  result.logits.clear();
  if (leader && call == StepCall::kAccept) {
    const std::vector<VerifyChain> chains = VerifyChains(a, b);
    VerifyAcceptConsumer accept(chains, &result.outcomes);
    status = model.Forward(verify, accept);
  } else if (leader && call == StepCall::kSampleDrafts) {
    const std::vector<DraftRow> drafts = DraftRows();
    DraftSampleConsumer sample(drafts, &result.proposals);
    status = model.Forward(verify, sample);
  } else {
    status = ForwardToHost(model, verify, &result.logits);
  }
  if (!status.ok()) return status;
  for (uint64_t id : {1, 2, 3}) result.cached.push_back(model.CachedLength(id).value_or(-1));
  status = ForwardToHost(
      model, {Seq(1, 14, {a[20]}, {0}), Seq(2, 6, {b[10]}, {0}), Seq(3, 6, {c[6], c[7]}, {0, 1})},
      &result.next);
  if (!status.ok()) return status;
  return result;
}

// Runs RunVerifyStep on `tp` ranks; one result per rank.
std::vector<VerifyStepResult> RunVerifyStepOnRanks(int tp, StepCall call) {
  return RunOnRanks<VerifyStepResult>(
      tp, kCheckpoint,
      [call](const LlamaWeights& w, Communicator* comm) { return RunVerifyStep(w, comm, call); });
}

// Every rank of `got` (rank 0 made another call than Forward) ends the verify step with
// the KV state of `plain` (all ranks Forward), and followers saw rank 0's logits.
void ExpectSameStateAsForward(const std::vector<VerifyStepResult>& got,
                              const std::vector<VerifyStepResult>& plain) {
  ASSERT_EQ(got.size(), plain.size());
  for (size_t r = 0; r < got.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(got[r].cached, (std::vector<int>{16, 7, 6}));
    EXPECT_EQ(got[r].cached, plain[r].cached);
    EXPECT_TRUE(BitwiseEqual(got[r].next, plain[r].next)) << "KV state differs";
    if (r > 0) {
      EXPECT_TRUE(BitwiseEqual(got[r].logits, plain[0].logits));
    }
  }
}

// Acceptance on rank 0 (other ranks: host logits) commits exactly what Forward followed
// by HostVerifyAccept commits, and leaves the same KV state on every rank.
TEST(LlamaAcceptConsumerTest, EqualsHostLogitsThenHostVerifyAccept) {
  const std::vector<int32_t> a = RandomTokens(24, 128, 4), b = RandomTokens(12, 128, 5);
  const std::vector<VerifyChain> chains = VerifyChains(a, b);
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp = " + std::to_string(tp));
    const std::vector<VerifyStepResult> plain = RunVerifyStepOnRanks(tp, StepCall::kForward);
    const std::vector<VerifyStepResult> accept = RunVerifyStepOnRanks(tp, StepCall::kAccept);
    ASSERT_EQ(plain.size(), size_t(tp));
    ASSERT_EQ(accept.size(), size_t(tp));
    ASSERT_EQ(plain[0].logits.size(), size_t(7 * 128));
    std::vector<VerifyOutcome> want;
    ASSERT_TRUE(HostVerifyAccept(plain[0].logits, 128, chains, &want).ok());
    const std::vector<VerifyOutcome>& got = accept[0].outcomes;
    ASSERT_EQ(got.size(), chains.size());
    for (size_t i = 0; i < chains.size(); ++i) {
      SCOPED_TRACE("chain " + std::to_string(i));
      EXPECT_TRUE(got[i].status.ok()) << got[i].status;
      EXPECT_EQ(got[i].committed, want[i].committed);
      EXPECT_EQ(got[i].num_accepted, want[i].num_accepted);
      EXPECT_EQ(got[i].logprobs, want[i].logprobs);
      EXPECT_EQ(got[i].committed.size(), size_t(got[i].num_accepted) + 1);
      EXPECT_EQ(got[i].logprobs.size(), chains[i].want_logprobs ? got[i].committed.size() : 0u);
    }
    ExpectSameStateAsForward(accept, plain);
  }
}

// Draft sampling on rank 0 (other ranks: host logits) proposes exactly what Forward
// followed by HostSampleDrafts proposes, and leaves the same KV state on every rank.
TEST(LlamaDraftSampleConsumerTest, EqualsHostLogitsThenHostSampleDrafts) {
  const std::vector<DraftRow> drafts = DraftRows();
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp = " + std::to_string(tp));
    const std::vector<VerifyStepResult> plain = RunVerifyStepOnRanks(tp, StepCall::kForward);
    const std::vector<VerifyStepResult> sampled = RunVerifyStepOnRanks(tp, StepCall::kSampleDrafts);
    ASSERT_EQ(plain.size(), size_t(tp));
    ASSERT_EQ(sampled.size(), size_t(tp));
    ASSERT_EQ(plain[0].logits.size(), size_t(7 * 128));
    std::vector<DraftProposal> want;
    ASSERT_TRUE(HostSampleDrafts(plain[0].logits, 128, drafts, &want).ok());
    const std::vector<DraftProposal>& got = sampled[0].proposals;
    ASSERT_EQ(got.size(), drafts.size());
    for (size_t i = 0; i < drafts.size(); ++i) {
      SCOPED_TRACE("draft row " + std::to_string(i));
      EXPECT_TRUE(got[i].status.ok()) << got[i].status;
      EXPECT_EQ(got[i].token, want[i].token);
      EXPECT_EQ(got[i].q.ids, want[i].q.ids);
      EXPECT_EQ(got[i].q.probs, want[i].q.probs);
      EXPECT_GE(got[i].q.ids.size(), 1u);
      EXPECT_LE(got[i].q.ids.size(), size_t(drafts[i].q_size));
    }
    ExpectSameStateAsForward(sampled, plain);
  }
}

// A collective that fails mid-forward (the peer rank never arrives) returns the error
// and leaves each sequence of the batch at its start_position (new ones released).
TEST(LlamaTensorParallelTest, CollectiveFailureRollsTheBatchBack) {
  auto group = LocalGroup::Create(2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::unique_ptr<LlamaModel> models[2];
  std::unique_ptr<Backend> backends[2];
  LlamaModelOptions options;
  options.collective_timeout = absl::Milliseconds(200);
  for (int r = 0; r < 2; ++r) {
    auto weights = LoadLlamaWeights(kCheckpoint, r, 2);
    ASSERT_TRUE(weights.ok()) << weights.status();
    backends[r] = MakeCpuBackend(1);
    auto model = LlamaModel::Create(*weights, backends[r].get(), (*group)[r].get(), options);
    ASSERT_TRUE(model.ok()) << model.status();
    models[r] = *std::move(model);
  }
  const std::vector<int32_t> tokens = RandomTokens(12, 128, 3);
  // Both ranks: sequence 1 gets 12 tokens.
  std::vector<float> logits[2];
  absl::Status statuses[2];
  std::thread peer(
      [&] { statuses[1] = ForwardToHost(*models[1], {Seq(1, 0, tokens, {})}, &logits[1]); });
  statuses[0] = ForwardToHost(*models[0], {Seq(1, 0, tokens, {})}, &logits[0]);
  peer.join();
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  ASSERT_TRUE(statuses[1].ok()) << statuses[1];

  // Only rank 0 runs the next step: it times out in the first all-reduce.
  const absl::Status status =
      ForwardToHost(*models[0], {Seq(1, 8, {5, 6, 7}, {0}), Seq(2, 0, {1, 2, 3}, {2})}, &logits[0]);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_EQ(models[0]->CachedLength(1).value_or(-1), 8);
  EXPECT_FALSE(models[0]->CachedLength(2).ok());
  EXPECT_EQ(models[0]->kv_stats().num_sequences, 1);
  EXPECT_EQ(models[0]->kv_stats().used_blocks, 1);  // 8 tokens in one 16-token block.
}

}  // namespace
}  // namespace tandem
