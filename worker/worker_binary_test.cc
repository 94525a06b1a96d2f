// The tandem-worker binary: bad flags, model directories and Medusa heads fail at
// start-up with one line on stderr and exit code 2; a draft worker serves Draft over gRPC, expires
// leases and exits 0 on SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/rendezvous_service.h"
#include "common/server.h"
#include "kernels/cuda/device.h"
#include "worker/process_test_util.h"
#include "worker/test_util.h"
#include "worker/verify_scenario.h"

namespace tandem {
namespace worker {
namespace {

using testing::Health;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

struct BadStart {
  std::vector<std::string> args;
  std::string expected;  // Substring of the error line.
};

TEST(WorkerBinaryTest, BadStartsExitTwoWithOneLine) {
  const std::string model = std::string("--model_dir=") + testing::kTpCheckpoint;
  std::vector<BadStart> cases = {
      {{"--no_such_flag=1", model}, "unknown flag --no_such_flag"},
      {{"--rank=abc", model}, "--rank"},
      {{"--role=critic", model}, "--role"},
      {{"--threads=-1", model}, "--threads"},
      {{}, "--model_dir: is required"},
      {{"--model_dir=/nonexistent/model"}, "/nonexistent/model"},
      {{"--model_dir=" + testing::TestTempDir()}, "config.json"},
      {{"--role=draft", "--tp_size=2", model}, "--tp_size"},
      {{"--tp_size=4", "--rank=4", model}, "--rank"},
      {{"--tp_size=4", model}, "--rendezvous"},
      {{"--tp_size=3", "--rendezvous_dir=/tmp/x", "--run_id=r", model}, "divisible"},
      {{"--tp_size=2", "--comm=local", "--rendezvous_dir=/tmp/x", "--run_id=r", model}, "--comm"},
      {{"--tp_size=2", "--rendezvous_dir=/tmp/x", "--run_id=bad/id", model}, "--run_id"},
      {{"--max_speculative_tokens=0", model}, "--max_speculative_tokens"},
      {{"--lease_timeout_s=0", model}, "--lease_timeout_s"},
      {{"--listen=nowhere", model}, "--listen"},
      {{"--kv_dtype=q8_0", model}, "--kv_dtype: 'q8_0' is not f32, f16 or bf16"},
      {{"stray", model}, "unexpected argument 'stray'"},
      {{"--synthetic=tiny", model}, "--synthetic: cannot be combined with --model_dir"},
      {{"--synthetic=gpt-9"}, "--synthetic: "},
      {{"--synthetic=tiny:1/2"}, "--synthetic: 'tiny:1/2' is rank 1 of 2"},
  };
  // Medusa heads that do not fit the model: one line naming the file and the problem.
  const std::string heads_dir = testing::TestTempDir() + "/bad_heads";
  std::filesystem::create_directories(heads_dir);
  std::filesystem::copy(
      testing::kTpCheckpoint, heads_dir,
      std::filesystem::copy_options::overwrite_existing | std::filesystem::copy_options::recursive);
  std::ofstream(heads_dir + "/medusa_lm_head.safetensors") << "not a safetensors file";
  cases.push_back({{"--model_dir=" + heads_dir},
                   "config.json: field \"medusa_num_heads\" is missing (required with "
                   "medusa_lm_head.safetensors)"});
  // Where a GPU exists the CUDA backend starts; elsewhere it is a start-up error.
  if (tandem::cuda::DeviceCount() == 0) {
    cases.push_back({{"--backend=cuda", model}, "--backend=cuda: CUDA backend not available"});
  }
  int n = 0;
  for (const BadStart& c : cases) {
    const std::string log = absl::StrCat(testing::TestTempDir(), "/bad-start-", n++, ".log");
    auto process = testing::ChildProcess::Start(testing::WorkerBinary(), c.args, log);
    ASSERT_TRUE(process.ok()) << process.status();
    EXPECT_EQ((*process)->Wait(absl::Seconds(10)), 2) << c.expected;
    const std::string output = ReadFile(log);
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
    EXPECT_TRUE(absl::StartsWith(output, "tandem-worker: ")) << output;
    EXPECT_TRUE(absl::StrContains(output, c.expected))
        << "want '" << c.expected << "' in " << output;
  }
}

// --synthetic: a target with random weights of real shapes (here the tiny spec) starts,
// says what it is on stderr and in Describe, and serves Prefill and Verify.
TEST(WorkerBinaryTest, SyntheticTargetIsLabelledAndServes) {
  const int port = testing::FreePort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string log = testing::TestTempDir() + "/synthetic.log";
  auto process =
      testing::ChildProcess::Start(testing::WorkerBinary(),
                                   {"--role=target", "--synthetic=tiny", "--listen=" + address,
                                    "--threads=1", "--kv_cache_mb=4"},
                                   log);
  ASSERT_TRUE(process.ok()) << process.status();
  ASSERT_TRUE(testing::WaitForHealth(address, Health::kServing, absl::Seconds(20)))
      << (*process)->LogTail();
  EXPECT_TRUE(absl::StrContains(ReadFile(log), "SYNTHETIC WEIGHTS (tiny:0/1")) << ReadFile(log);
  auto stub = testing::WorkerStub(address);
  {
    grpc::ClientContext context;
    v1::DescribeResponse d;
    ASSERT_TRUE(stub->Describe(&context, v1::DescribeRequest(), &d).ok());
    EXPECT_EQ(d.model().name(), "synthetic:tiny (NOT A MODEL)");
    EXPECT_EQ(d.model().vocab_size(), 256u);
    EXPECT_TRUE(d.model().synthetic());
  }
  {
    grpc::ClientContext context;
    v1::PrefillRequest request;
    v1::PrefillSequence* s = request.add_sequences();
    s->set_sequence_id(1);
    for (int t : {1, 2, 3, 4}) s->add_tokens(t);
    v1::PrefillResponse response;
    ASSERT_TRUE(stub->Prefill(&context, request, &response).ok());
  }
  grpc::ClientContext context;
  v1::VerifyRequest request;
  v1::VerifySequence* s = request.add_sequences();
  s->set_sequence_id(1);
  s->set_start_position(4);
  s->add_tokens(5);
  for (int t : {6, 7, 8}) *s->add_proposals() = testing::PointProposal(t);
  *s->mutable_sampling() = testing::Greedy();
  v1::VerifyResponse response;
  const grpc::Status status = stub->Verify(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.sequences_size(), 1);
  const v1::VerifiedSequence& verified = response.sequences(0);
  EXPECT_EQ(verified.committed_size(), verified.num_accepted() + 1);
  EXPECT_EQ(verified.cached_length(), 5u + verified.num_accepted());
}

TEST(WorkerBinaryTest, DraftWorkerServesDraftsExpiresLeasesAndStops) {
  const int port = testing::FreePort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto process = testing::ChildProcess::Start(
      testing::WorkerBinary(),
      {"--role=draft", std::string("--model_dir=") + testing::kWideVocabCheckpoint,
       "--listen=" + address, "--threads=1", "--kv_cache_mb=4", "--lease_timeout_s=0.5",
       "--proposal_top_k=8"},
      testing::TestTempDir() + "/draft.log");
  ASSERT_TRUE(process.ok()) << process.status();
  ASSERT_TRUE(testing::WaitForHealth(address, Health::kServing, absl::Seconds(20)))
      << (*process)->LogTail();
  auto stub = testing::WorkerStub(address);
  {
    grpc::ClientContext context;
    v1::DescribeResponse d;
    ASSERT_TRUE(stub->Describe(&context, v1::DescribeRequest(), &d).ok());
    EXPECT_EQ(d.role(), v1::WORKER_ROLE_DRAFT);
    EXPECT_EQ(d.lease_timeout_ms(), 500u);
    EXPECT_EQ(d.model().name(), "tiny_f16_hd20_kv1");
    EXPECT_FALSE(d.model().synthetic());
  }
  v1::DraftRequest request;
  v1::DraftSequence* s = request.add_sequences();
  s->set_sequence_id(4);
  for (int t : {5, 6, 7, 8}) s->add_tokens(t);
  s->set_num_draft_tokens(3);
  s->mutable_sampling()->set_temperature(0.9f);
  s->mutable_sampling()->set_seed(1);
  {
    grpc::ClientContext context;
    v1::DraftResponse response;
    ASSERT_TRUE(stub->Draft(&context, request, &response).ok());
    ASSERT_EQ(response.sequences(0).proposals_size(), 3);
    EXPECT_EQ(response.sequences(0).proposals(0).q_ids_size(), 8);  // --proposal_top_k.
    EXPECT_EQ(response.sequences(0).cached_length(), 6u);
  }
  {
    grpc::ClientContext context;
    v1::VerifyResponse response;
    EXPECT_EQ(stub->Verify(&context, v1::VerifyRequest(), &response).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }
  // The lease (0.5 s) runs out.
  v1::WorkerStats stats;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    absl::SleepFor(absl::Milliseconds(100));
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetStats(&context, v1::GetStatsRequest(), &stats).ok());
  } while (stats.leases_expired() == 0 && absl::Now() < deadline);
  EXPECT_EQ(stats.leases_expired(), 1u);
  EXPECT_EQ(stats.active_sequences(), 0u);
  EXPECT_EQ(stats.steps(), 1u);
  (*process)->Signal(SIGTERM);
  EXPECT_EQ((*process)->Wait(absl::Seconds(10)), 0) << (*process)->LogTail();
}

TEST(WorkerBinaryTest, GroupFormsThroughTheRendezvousService) {
  RendezvousService rendezvous;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&rendezvous});
  ASSERT_TRUE(server.ok()) << server.status();
  auto group = testing::WorkerGroup::Start(
      testing::kTpCheckpoint, 2, "grpc-rdv",
      {absl::StrCat("--rendezvous=127.0.0.1:", (*server)->port()), "--kv_cache_mb=4",
       "--step_timeout_s=10", "--regroup_timeout_s=5"});
  ASSERT_TRUE(group.ok()) << group.status();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(testing::WaitForHealth((*group)->address(r), Health::kServing, absl::Seconds(25)))
        << (*group)->Logs();
  }
  auto stub = testing::WorkerStub((*group)->leader_address());
  v1::VerifyRequest request;
  v1::VerifySequence* s = request.add_sequences();
  s->set_sequence_id(1);
  for (int t : {1, 2, 3}) s->add_tokens(t);
  s->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_GREEDY);
  grpc::ClientContext context;
  v1::VerifyResponse response;
  ASSERT_TRUE(stub->Verify(&context, request, &response).ok()) << (*group)->Logs();
  EXPECT_EQ(response.sequences(0).committed_size(), 1);
  EXPECT_EQ(response.sequences(0).cached_length(), 3u);
  EXPECT_GT(rendezvous.num_keys(), 0u);
  (*group)->process(0).Signal(SIGTERM);
  for (int r = 0; r < 2; ++r) EXPECT_EQ((*group)->process(r).Wait(absl::Seconds(15)), 0);
  rendezvous.Shutdown();
  (*server)->Shutdown(absl::Seconds(1));
}

// Every process of a cluster stopped at once (Kubernetes): the followers and the
// rendezvous store (the coordinator) are gone while the leader is re-forming the group,
// waiting up to the regroup timeout for ranks that will never come. SIGTERM must still
// stop it within a couple of seconds (it gives up the forming attempt, and tries the
// store for kShutdownStoreBudget at most), not after the regroup timeout.
void ExpectLeaderExitsPromptlyWhenFollowersAndStoreAreGone(const std::string& comm) {
  RendezvousService rendezvous;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&rendezvous});
  ASSERT_TRUE(server.ok()) << server.status();
  auto group = testing::WorkerGroup::Start(
      testing::kTpCheckpoint, 2, "vanish-" + comm,
      {absl::StrCat("--rendezvous=127.0.0.1:", (*server)->port()), "--comm=" + comm,
       "--kv_cache_mb=4", "--step_timeout_s=10", "--heartbeat_s=0.25", "--regroup_timeout_s=60"});
  ASSERT_TRUE(group.ok()) << group.status();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(testing::WaitForHealth((*group)->address(r), Health::kServing, absl::Seconds(25)))
        << (*group)->Logs();
  }
  (*group)->process(1).Signal(SIGKILL);
  EXPECT_EQ((*group)->process(1).Wait(absl::Seconds(5)), -2);
  // The leader's heartbeat fails; it starts forming the next generation.
  ASSERT_TRUE(
      testing::WaitForHealth((*group)->leader_address(), Health::kNotServing, absl::Seconds(10)))
      << (*group)->Logs();
  absl::SleepFor(absl::Milliseconds(500));
  rendezvous.Shutdown();
  (*server)->Shutdown(absl::ZeroDuration());
  server->reset();
  const absl::Time start = absl::Now();
  (*group)->process(0).Signal(SIGTERM);
  EXPECT_EQ((*group)->process(0).Wait(absl::Seconds(20)), 0) << (*group)->Logs();
  EXPECT_LT(absl::Now() - start, absl::Seconds(6)) << (*group)->Logs();
}

TEST(WorkerBinaryTest, LeaderExitsPromptlyWhenFollowersAndStoreAreGoneTcp) {
  ExpectLeaderExitsPromptlyWhenFollowersAndStoreAreGone("tcp");
}

TEST(WorkerBinaryTest, LeaderExitsPromptlyWhenFollowersAndStoreAreGoneGloo) {
  ExpectLeaderExitsPromptlyWhenFollowersAndStoreAreGone("gloo");
}

}  // namespace
}  // namespace worker
}  // namespace tandem
