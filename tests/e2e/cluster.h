// A whole Tandem cluster on loopback for end-to-end tests: a draft worker, a target
// group of tp processes (gloo over a file store) and a tandem-coordinator, started
// from the built binaries with the bundled models.
#ifndef TANDEM_TESTS_E2E_CLUSTER_H_
#define TANDEM_TESTS_E2E_CLUSTER_H_

#include <memory>
#include <string>
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
};

class Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(const ClusterOptions& options);
  ~Cluster();

  std::unique_ptr<v1::Tandem::Stub> Client() const;
  std::string address() const;
  worker::testing::WorkerGroup& target() { return *target_; }
  worker::testing::WorkerGroup* draft() { return draft_.get(); }
  worker::testing::ChildProcess& coordinator() { return *coordinator_; }
  // Waits until the coordinator reports the draft as available (or not).
  bool WaitForDraftAvailable(bool available, absl::Duration timeout);
  // Logs of every process, for failure messages.
  std::string Logs() const;

 private:
  Cluster() = default;
  int port_ = 0;
  std::unique_ptr<worker::testing::WorkerGroup> target_;
  std::unique_ptr<worker::testing::WorkerGroup> draft_;
  std::unique_ptr<worker::testing::ChildProcess> coordinator_;
};

// Greedy generation of `max_new_tokens` for `prompt` with `method` and fixed K (k < 0:
// adaptive). Returns the response or the error status.
absl::StatusOr<v1::GenerateResponse> Generate(v1::Tandem::Stub* stub, const std::string& prompt,
                                              int max_new_tokens,
                                              v1::SpeculationMethod method, int k,
                                              v1::Pipelining pipelining = v1::PIPELINING_DEFAULT);

// Worker statistics through its Worker service.
absl::StatusOr<v1::WorkerStats> WorkerStatsOf(const std::string& address);

// Code-completion prompts for tests (from bench/prompts/code_completion.jsonl).
std::vector<std::string> TestPrompts(int count);

}  // namespace tandem::e2e

#endif  // TANDEM_TESTS_E2E_CLUSTER_H_
