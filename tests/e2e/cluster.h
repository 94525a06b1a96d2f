// A whole Tandem cluster on loopback for end-to-end tests: a draft worker, a target
// group of tp processes (the workers' default collective, tcp, rendezvousing through a
// file store; "--comm=gloo" in worker_flags picks gloo) and a tandem-coordinator,
// started from the built binaries with the bundled models.
#ifndef TANDEM_TESTS_E2E_CLUSTER_H_
#define TANDEM_TESTS_E2E_CLUSTER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/v1/tandem.grpc.pb.h"
#include "tandem/v1/worker.grpc.pb.h"
#include "worker/process_test_util.h"

namespace tandem::e2e {

struct ClusterOptions {
  int tp = 4;
  bool with_draft = true;
  std::string target_model = "models/target";
  std::string draft_model = "models/draft";
  std::vector<std::string> coordinator_flags;
  std::vector<std::string> worker_flags;  // Added to every worker.
  std::string tag = "cluster";
  // How the test reaches the coordinator's public port (health, Client()); null =
  // plaintext. `client_token` (when not empty) is sent with every Client() call.
  std::shared_ptr<grpc::ChannelCredentials> client_credentials;
  std::string client_token;
  // Seconds to wait for the coordinator to serve.
  int start_timeout_s = 180;
};

class Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(const ClusterOptions& options);
  ~Cluster();

  std::unique_ptr<v1::Tandem::Stub> Client() const;
  std::string address() const;
  // Ends the coordinator with `signal` (waits for it to exit), then starts it again on
  // the same port with the same flags and waits until it serves. The workers keep
  // running.
  absl::Status RestartCoordinator(int signal);
  // Process ids: coordinator, target ranks, draft.
  std::vector<int> pids();
  worker::testing::WorkerGroup& target() { return *target_; }
  worker::testing::WorkerGroup* draft() { return draft_.get(); }
  worker::testing::ChildProcess& coordinator() { return *coordinator_; }
  // Waits until the coordinator reports the draft as available (or not).
  bool WaitForDraftAvailable(bool available, absl::Duration timeout);
  // Logs of every process, for failure messages.
  std::string Logs() const;

 private:
  Cluster() = default;
  absl::Status StartCoordinator();
  absl::Status WaitUntilServing();
  ClusterOptions options_;
  std::vector<std::string> coordinator_args_;
  int coordinator_starts_ = 0;
  int port_ = 0;
  std::unique_ptr<worker::testing::WorkerGroup> target_;
  std::unique_ptr<worker::testing::WorkerGroup> draft_;
  std::unique_ptr<worker::testing::ChildProcess> coordinator_;
};

// Greedy generation of `max_new_tokens` for `prompt` with `method` and fixed K (k < 0:
// adaptive), and a dynamic draft tree of `draft_tree_nodes` nodes (< 0: the server's).
// Returns the response or the error status.
absl::StatusOr<v1::GenerateResponse> Generate(v1::Tandem::Stub* stub, const std::string& prompt,
                                              int max_new_tokens, v1::SpeculationMethod method,
                                              int k,
                                              v1::Pipelining pipelining = v1::PIPELINING_DEFAULT,
                                              int draft_tree_nodes = -1);

// Worker statistics through its Worker service (plaintext, or `credentials`).
absl::StatusOr<v1::WorkerStats> WorkerStatsOf(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

// Health of a gRPC server through `credentials` (null = plaintext).
worker::testing::Health CheckHealthWith(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials);

// Runs `fn(i)` for i < n on `threads` client threads.
template <typename Fn>
void ParallelFor(int n, int threads, Fn fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) fn(i);
    });
  }
  for (auto& th : pool) th.join();
}

// The generated token ids of `r`.
inline std::vector<int> Ids(const v1::GenerateResponse& r) {
  return std::vector<int>(r.token_ids().begin(), r.token_ids().end());
}

// Code-completion prompts for tests (from bench/prompts/code_completion.jsonl).
std::vector<std::string> TestPrompts(int count);

// Twenty short code prompts for the identity tests (several e2e suites share them).
const std::vector<std::string>& HeldOutPrompts();

}  // namespace tandem::e2e

#endif  // TANDEM_TESTS_E2E_CLUSTER_H_
