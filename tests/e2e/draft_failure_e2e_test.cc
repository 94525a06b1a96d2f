// The draft worker dies (SIGKILL) in the middle of greedy streams: every request still
// completes, with output identical to target-only decoding; the fallback is visible
// in the stats; after the draft restarts, speculation resumes.
// This is the one end-to-end test whose target group runs on gloo; every other e2e,
// fault and soak test runs on the workers' default collective (tcp).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "tests/e2e/cluster.h"

namespace tandem::e2e {
namespace {

TEST(DraftFailureE2eTest, RequestsSurviveADraftCrashAndSpeculationResumes) {
  ClusterOptions options;
  options.tp = 2;
  options.tag = "draftfail";
  options.worker_flags = {"--comm=gloo"};
  auto started = Cluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  Cluster& cluster = **started;
  auto stub = cluster.Client();
  const std::vector<std::string> prompts = TestPrompts(8);
  constexpr int kTokens = 96;

  // The target-only outputs, all prompts at once (greedy outputs do not depend on the
  // batch: coordinator_e2e_test's ConcurrentStreamsEqualTheirSingleRequestOutputs).
  std::vector<std::vector<int>> baseline(prompts.size());
  std::vector<absl::Status> baseline_status(prompts.size());
  {
    std::vector<std::thread> calls;
    for (size_t i = 0; i < prompts.size(); ++i) {
      calls.emplace_back([&, i] {
        auto r = Generate(stub.get(), prompts[i], kTokens, v1::SPECULATION_METHOD_NONE, -1);
        baseline_status[i] = r.status();
        if (r.ok()) baseline[i].assign(r->token_ids().begin(), r->token_ids().end());
      });
    }
    for (auto& t : calls) t.join();
  }
  for (const absl::Status& st : baseline_status) ASSERT_TRUE(st.ok()) << st;

  std::atomic<int> first_chunks{0};
  std::vector<std::thread> streams;
  std::vector<std::vector<int>> got(prompts.size());
  std::vector<v1::RequestStats> stats(prompts.size());
  std::vector<grpc::Status> status(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    streams.emplace_back([&, i] {
      v1::GenerateRequest req;
      req.set_text(prompts[i]);
      req.set_max_new_tokens(kTokens);
      req.set_return_token_ids(true);
      req.mutable_speculation()->set_method(v1::SPECULATION_METHOD_DRAFT);
      req.mutable_speculation()->set_num_speculative_tokens(2);
      grpc::ClientContext ctx;
      auto reader = stub->GenerateStream(&ctx, req);
      v1::GenerateStreamResponse chunk;
      bool counted = false;
      while (reader->Read(&chunk)) {
        got[i].insert(got[i].end(), chunk.token_ids().begin(), chunk.token_ids().end());
        if (!counted) {
          ++first_chunks;
          counted = true;
        }
        if (chunk.has_stats()) stats[i] = chunk.stats();
      }
      status[i] = reader->Finish();
    });
  }
  // Kill the draft once every stream is under way.
  const absl::Time end = absl::Now() + absl::Seconds(60);
  while (first_chunks.load() < static_cast<int>(prompts.size()) && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  cluster.draft()->process(0).Signal(SIGKILL);
  for (auto& t : streams) t.join();

  int fallback = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(status[i].ok()) << status[i].error_message();
    EXPECT_EQ(got[i], baseline[i]) << "stream " << i;
    fallback += stats[i].fallback_steps();
  }
  EXPECT_GT(fallback, 0) << "no request reported a fallback step";
  ASSERT_TRUE(cluster.WaitForDraftAvailable(false, absl::Seconds(5)));

  // Restart the draft: speculation resumes for new requests.
  ASSERT_TRUE(cluster.draft()->Restart(0).ok());
  ASSERT_TRUE(cluster.WaitForDraftAvailable(true, absl::Seconds(60))) << cluster.Logs();
  auto r = Generate(stub.get(), prompts[0], kTokens, v1::SPECULATION_METHOD_DRAFT, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->stats().draft_tokens_proposed(), 0u);
  EXPECT_EQ(std::vector<int>(r->token_ids().begin(), r->token_ids().end()), baseline[0]);
}

}  // namespace
}  // namespace tandem::e2e
