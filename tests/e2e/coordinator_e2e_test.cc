// End-to-end tests of the coordinator with real processes: a draft worker, a 4-process
// target group on the default collective (tcp; TANDEM_E2E_TP=2 for 2 processes, as the
// sanitizer run does) and tandem-coordinator, on the bundled models, through the public
// gRPC API.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"

namespace tandem::e2e {
namespace {

// Target ranks: 4 (more ranks than the target's 2 KV heads: each holds a replicated KV
// head), or TANDEM_E2E_TP = 1, 2 or 4. The sanitizer run in ./run.sh test uses 2: six
// processes under ASan on two cores cost minutes, and //model:llama_tp_test covers the
// replicated KV heads under the sanitizers.
int TargetTp() {
  const char* env = std::getenv("TANDEM_E2E_TP");
  const int tp = env != nullptr ? std::atoi(env) : 4;
  return tp == 1 || tp == 2 ? tp : 4;
}

// The cluster a test suite shares, started once in its SetUpTestSuite (null, with a
// failure recorded, when it does not start).
Cluster* StartSuiteCluster(const ClusterOptions& options) {
  auto cluster = Cluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? cluster->release() : nullptr;
}

class CoordinatorE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.tp = TargetTp();
    options.tag = "e2e";
    options.coordinator_flags = {"--max_running=64", "--max_queue=512", "--predraft_branches=3",
                                 "--draft_tree_siblings=1"};
    // Room for dynamic draft trees of 32 nodes (a verify's and a draft call's limit).
    options.worker_flags = {"--max_speculative_tokens=32"};
    cluster_ = StartSuiteCluster(options);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static Cluster* cluster_;
};
Cluster* CoordinatorE2eTest::cluster_ = nullptr;

// Number of prompts of the greedy test: 20, or TANDEM_E2E_GREEDY_PROMPTS (the
// sanitizer run in ./run.sh test uses fewer; all its K values and both pipelining modes stay).
int GreedyPromptCount() {
  const char* env = std::getenv("TANDEM_E2E_GREEDY_PROMPTS");
  const int n = env != nullptr ? std::atoi(env) : 0;
  return n > 0 ? std::min(n, 20) : 20;
}

// K values of the greedy test: 1, 3, 4, 7, 8 (K + 1 verified rows on both sides of the
// 4- and 8-row boundaries, and the cap max_k = 8; the other K run no other code path),
// or every K in 1..8 with TANDEM_E2E_ALL_K=1 (the full grid, for release checks).
std::vector<int> GreedyKs() {
  const char* env = std::getenv("TANDEM_E2E_ALL_K");
  if (env != nullptr && std::string(env) == "1") return {1, 2, 3, 4, 5, 6, 7, 8};
  return {1, 3, 4, 7, 8};
}

TEST_F(CoordinatorE2eTest, GreedySpeculationIsTokenIdenticalToTargetOnly) {
  auto stub = cluster_->Client();
  const int prompt_count = GreedyPromptCount();
  const std::vector<std::string> prompts = TestPrompts(prompt_count);
  ASSERT_EQ(prompts.size(), static_cast<size_t>(prompt_count));
  constexpr int kTokens = 24;
  std::vector<std::vector<int>> baseline(prompts.size());
  ParallelFor(prompts.size(), 20, [&](int i) {
    auto r = Generate(stub.get(), prompts[i], kTokens, v1::SPECULATION_METHOD_NONE, -1);
    ASSERT_TRUE(r.ok()) << r.status() << cluster_->Logs();
    baseline[i] = Ids(*r);
    EXPECT_EQ(r->stats().draft_tokens_proposed(), 0u);
  });
  // Every K of GreedyKs() (chains, and one sibling per node: the server's
  // --draft_tree_siblings=1), and dynamic draft trees of 16 nodes at K = 4 and 32 nodes
  // at K = 8 (request overrides), with and without pipelining, all at once.
  struct Case {
    int prompt, k;
    v1::Pipelining pipelining;
    int tree_nodes = -1;  // -1: the server's (no dynamic tree).
  };
  std::vector<std::pair<int, int>> shapes;  // {K, tree nodes}.
  for (int k : GreedyKs()) shapes.push_back({k, -1});
  shapes.push_back({4, 16});
  shapes.push_back({8, 32});
  std::vector<Case> cases;
  for (int p = 0; p < prompt_count; ++p) {
    for (auto [k, nodes] : shapes) {
      cases.push_back({p, k, v1::PIPELINING_ON, nodes});
      cases.push_back({p, k, v1::PIPELINING_OFF, nodes});
    }
  }
  // PIPELINING_OFF in a running batch switches the whole batch to sequential steps, so
  // run the two halves in separate waves.
  for (v1::Pipelining mode : {v1::PIPELINING_ON, v1::PIPELINING_OFF}) {
    std::atomic<int> proposed{0}, accepted{0};
    // Per K = 4 shape (chain with one sibling, dynamic tree of 16): tokens, target steps
    // and fallback steps (a draft rejected or down), as dynamic trees must be drafted.
    std::atomic<int> k4_tokens[2] = {0, 0}, k4_steps[2] = {0, 0}, tree_fallback{0};
    ParallelFor(cases.size(), 32, [&](int i) {
      const Case& c = cases[i];
      if (c.pipelining != mode) return;
      auto r = Generate(stub.get(), prompts[c.prompt], kTokens, v1::SPECULATION_METHOD_DRAFT, c.k,
                        c.pipelining, c.tree_nodes);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(Ids(*r), baseline[c.prompt])
          << "prompt " << c.prompt << " K=" << c.k << " pipelining=" << c.pipelining
          << " tree nodes=" << c.tree_nodes;
      proposed += r->stats().draft_tokens_proposed();
      accepted += r->stats().draft_tokens_accepted();
      if (c.tree_nodes > 0) tree_fallback += r->stats().fallback_steps();
      if (c.k != 4) return;
      k4_tokens[c.tree_nodes > 0] += r->stats().generated_tokens();
      k4_steps[c.tree_nodes > 0] += r->stats().target_steps();
    });
    EXPECT_GT(proposed.load(), 0);
    EXPECT_EQ(tree_fallback.load(), 0);
    std::printf(
        "pipelining=%d: acceptance %.3f (%d/%d); K=4 tokens/step: chain+sibling %.2f, "
        "dynamic tree of 16 %.2f\n",
        mode, proposed ? double(accepted) / proposed : 0.0, accepted.load(), proposed.load(),
        double(k4_tokens[0]) / std::max(1, k4_steps[0].load()),
        double(k4_tokens[1]) / std::max(1, k4_steps[1].load()));
  }
}

TEST_F(CoordinatorE2eTest, PromptLookupIsTokenIdenticalToTargetOnly) {
  auto stub = cluster_->Client();
  const std::vector<std::string> prompts = TestPrompts(6);
  ParallelFor(prompts.size(), 6, [&](int i) {
    auto none = Generate(stub.get(), prompts[i], 32, v1::SPECULATION_METHOD_NONE, -1);
    auto lookup = Generate(stub.get(), prompts[i], 32, v1::SPECULATION_METHOD_PROMPT_LOOKUP, 4);
    ASSERT_TRUE(none.ok() && lookup.ok());
    EXPECT_EQ(Ids(*lookup), Ids(*none)) << "prompt " << i;
  });
}

// Prompt lookup with token trees (--prompt_lookup_branches=4, no draft worker): the
// target group verifies trees of several earlier continuations of the matched n-gram;
// greedy output stays target-only's, with a fixed K and adaptive, pipelining on and off.
class PromptLookupTreeE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.tp = TargetTp();
    options.with_draft = false;
    options.tag = "e2e_trees";
    options.coordinator_flags = {"--max_running=64", "--prompt_lookup_branches=4"};
    cluster_ = StartSuiteCluster(options);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static Cluster* cluster_;
};
Cluster* PromptLookupTreeE2eTest::cluster_ = nullptr;

TEST_F(PromptLookupTreeE2eTest, TreePromptLookupIsTokenIdenticalToTargetOnly) {
  auto stub = cluster_->Client();
  const std::vector<std::string> prompts = TestPrompts(6);
  constexpr int kTokens = 32;
  std::vector<std::vector<int>> baseline(prompts.size());
  ParallelFor(prompts.size(), 6, [&](int i) {
    auto r = Generate(stub.get(), prompts[i], kTokens, v1::SPECULATION_METHOD_NONE, -1);
    ASSERT_TRUE(r.ok()) << r.status() << cluster_->Logs();
    baseline[i] = Ids(*r);
  });
  // Separate waves: PIPELINING_OFF makes the whole running batch sequential.
  for (v1::Pipelining mode : {v1::PIPELINING_ON, v1::PIPELINING_OFF}) {
    std::atomic<int> proposed{0}, accepted{0};
    ParallelFor(2 * prompts.size(), 12, [&](int j) {
      const int i = j / 2, k = j % 2 == 0 ? 4 : -1;  // Fixed K = 4 and adaptive K.
      auto r =
          Generate(stub.get(), prompts[i], kTokens, v1::SPECULATION_METHOD_PROMPT_LOOKUP, k, mode);
      ASSERT_TRUE(r.ok()) << r.status() << cluster_->Logs();
      EXPECT_EQ(Ids(*r), baseline[i]) << "prompt " << i << " K=" << k << " pipelining=" << mode;
      proposed += r->stats().draft_tokens_proposed();
      accepted += r->stats().draft_tokens_accepted();
    });
    EXPECT_GT(proposed.load(), 0);
    std::printf("trees, pipelining=%d: accepted %d of depth %d\n", mode, accepted.load(),
                proposed.load());
  }
}

// Stop strings end the ids, log-probabilities and counts exactly where the text ends:
// speculative steps that commit past the stop string must not leak tokens.
TEST_F(CoordinatorE2eTest, StopStringsEndIdsWhereTheTextEnds) {
  auto stub = cluster_->Client();
  const std::vector<std::string> prompts = TestPrompts(4);
  ParallelFor(prompts.size(), 4, [&](int i) {
    auto none = Generate(stub.get(), prompts[i], 40, v1::SPECULATION_METHOD_NONE, -1);
    ASSERT_TRUE(none.ok()) << none.status();
    const std::string& text = none->text();
    ASSERT_GT(text.size(), 12u);
    const std::string stop = text.substr(text.size() / 2, 3);  // From the middle.
    const auto run = [&](v1::SpeculationMethod method, int k) {
      v1::GenerateRequest req;
      req.set_text(prompts[i]);
      req.set_max_new_tokens(40);
      req.set_return_token_ids(true);
      req.set_return_logprobs(true);
      req.add_stop(stop);
      req.mutable_speculation()->set_method(method);
      if (k >= 0) req.mutable_speculation()->set_num_speculative_tokens(k);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      v1::GenerateResponse resp;
      grpc::Status st = stub->Generate(&ctx, req, &resp);
      EXPECT_TRUE(st.ok()) << st.error_message();
      return resp;
    };
    const v1::GenerateResponse plain = run(v1::SPECULATION_METHOD_NONE, -1);
    EXPECT_EQ(plain.finish_reason(), v1::FINISH_REASON_STOP) << "prompt " << i;
    for (int k : {4, 8}) {
      const v1::GenerateResponse spec = run(v1::SPECULATION_METHOD_DRAFT, k);
      EXPECT_EQ(spec.text(), plain.text()) << "prompt " << i << " K=" << k;
      EXPECT_EQ(Ids(spec), Ids(plain)) << "prompt " << i << " K=" << k;
      EXPECT_EQ(spec.logprobs_size(), spec.token_ids_size());
      EXPECT_EQ(spec.stats().generated_tokens(), plain.stats().generated_tokens());
    }
  });
}

TEST_F(CoordinatorE2eTest, ConcurrentStreamsEqualTheirSingleRequestOutputs) {
  auto stub = cluster_->Client();
  const std::vector<std::string> prompts = TestPrompts(32);
  ASSERT_EQ(prompts.size(), 32u);
  std::vector<std::vector<int>> single(32);
  for (int i = 0; i < 32; ++i) {
    auto r = Generate(stub.get(), prompts[i], 8 + (i % 5) * 6, v1::SPECULATION_METHOD_DRAFT, -1);
    ASSERT_TRUE(r.ok()) << r.status();
    single[i] = Ids(*r);
  }
  ParallelFor(32, 32, [&](int i) {
    v1::GenerateRequest req;
    req.set_text(prompts[i]);
    req.set_max_new_tokens(8 + (i % 5) * 6);
    req.set_return_token_ids(true);
    grpc::ClientContext ctx;
    auto reader = stub->GenerateStream(&ctx, req);
    v1::GenerateStreamResponse chunk;
    std::vector<int> ids;
    std::string text;
    bool finished = false;
    while (reader->Read(&chunk)) {
      ids.insert(ids.end(), chunk.token_ids().begin(), chunk.token_ids().end());
      text += chunk.text_delta();
      if (chunk.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) finished = true;
    }
    grpc::Status st = reader->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(finished);
    EXPECT_EQ(ids, single[i]) << "stream " << i;
  });
}

TEST_F(CoordinatorE2eTest, BadRequestsGetTheirStatusCodes) {
  auto stub = cluster_->Client();
  struct Case {
    std::string name;
    std::function<void(v1::GenerateRequest&)> edit;
    grpc::StatusCode code;
  };
  const std::vector<Case> cases = {
      {"empty prompt", [](auto& r) { r.set_text(""); }, grpc::INVALID_ARGUMENT},
      {"no prompt", [](auto& r) { r.clear_prompt(); }, grpc::INVALID_ARGUMENT},
      // (Invalid UTF-8 text cannot be sent by a conforming client: protobuf refuses to
      // serialise it. The validator's own check is covered by request_validation_test.)
      {"stop string empty", [](auto& r) { r.add_stop(""); }, grpc::INVALID_ARGUMENT},
      {"greedy rule with sampling",
       [](auto& r) {
         r.mutable_sampling()->set_temperature(0.5f);
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_GREEDY);
       },
       grpc::INVALID_ARGUMENT},
      {"max_new_tokens", [](auto& r) { r.set_max_new_tokens(1 << 30); }, grpc::INVALID_ARGUMENT},
      {"nan temperature", [](auto& r) { r.mutable_sampling()->set_temperature(std::nanf("")); },
       grpc::INVALID_ARGUMENT},
      {"negative temperature", [](auto& r) { r.mutable_sampling()->set_temperature(-1); },
       grpc::INVALID_ARGUMENT},
      {"top_p zero", [](auto& r) { r.mutable_sampling()->set_top_p(0); }, grpc::INVALID_ARGUMENT},
      {"top_p above one", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); },
       grpc::INVALID_ARGUMENT},
      {"K too large", [](auto& r) { r.mutable_speculation()->set_num_speculative_tokens(1000); },
       grpc::INVALID_ARGUMENT},
      {"unknown method",
       [](auto& r) { r.mutable_speculation()->set_method(static_cast<v1::SpeculationMethod>(42)); },
       grpc::INVALID_ARGUMENT},
      {"unknown rule",
       [](auto& r) {
         r.mutable_speculation()->set_acceptance_rule(static_cast<v1::AcceptanceRule>(42));
       },
       grpc::INVALID_ARGUMENT},
      {"token id out of vocab", [](auto& r) { r.mutable_token_ids()->add_ids(1 << 24); },
       grpc::INVALID_ARGUMENT},
      {"prompt longer than context",
       [](auto& r) {
         for (int i = 0; i < 5000; ++i) r.mutable_token_ids()->add_ids(5);
       },
       grpc::INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest req;
    req.set_text("def f():");
    req.set_max_new_tokens(4);
    c.edit(req);
    grpc::ClientContext ctx;
    v1::GenerateResponse resp;
    grpc::Status st = stub->Generate(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), c.code) << c.name << ": " << st.error_message();
    EXPECT_FALSE(st.error_message().empty()) << c.name;
  }
}

int64_t UsedBlocks(const std::string& address) {
  auto stats = WorkerStatsOf(address);
  return stats.ok() ? stats->kv_used_blocks() : -1;
}

// Waits until both workers report no used KV blocks.
bool WaitForFreeKv(Cluster* cluster, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (UsedBlocks(cluster->target().leader_address()) == 0 &&
        UsedBlocks(cluster->draft()->leader_address()) == 0) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

TEST_F(CoordinatorE2eTest, CancellationAndDeadlineFreeKvOnAllWorkers) {
  auto stub = cluster_->Client();
  ASSERT_TRUE(WaitForFreeKv(cluster_, absl::Seconds(10)));
  // A stream cancelled by the client after its first chunk.
  {
    v1::GenerateRequest req;
    req.set_text(TestPrompts(1)[0]);
    req.set_max_new_tokens(2000);
    req.set_ignore_eos(true);
    grpc::ClientContext ctx;
    auto reader = stub->GenerateStream(&ctx, req);
    v1::GenerateStreamResponse chunk;
    ASSERT_TRUE(reader->Read(&chunk));
    EXPECT_GT(UsedBlocks(cluster_->target().leader_address()), 0);
    ctx.TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::CANCELLED);
  }
  EXPECT_TRUE(WaitForFreeKv(cluster_, absl::Seconds(5))) << "KV leaked after cancellation";
  // A request that runs past its deadline.
  {
    v1::GenerateRequest req;
    req.set_text(TestPrompts(2)[1]);
    req.set_max_new_tokens(2000);
    req.set_ignore_eos(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(700));
    v1::GenerateResponse resp;
    EXPECT_EQ(stub->Generate(&ctx, req, &resp).error_code(), grpc::DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(WaitForFreeKv(cluster_, absl::Seconds(5))) << "KV leaked after a deadline";
}

}  // namespace
}  // namespace tandem::e2e
