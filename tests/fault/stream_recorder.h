// Streams for fault tests: each GenerateStream call runs on its own thread and records
// every chunk's tokens with its arrival time, the final status and when it came.
#ifndef TANDEM_TESTS_FAULT_STREAM_RECORDER_H_
#define TANDEM_TESTS_FAULT_STREAM_RECORDER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::fault {

// A greedy request for `tokens` tokens (EOS ignored, token ids returned).
v1::GenerateRequest GreedyRequest(const std::string& prompt, int tokens,
                                  v1::SpeculationMethod method, int k);

class RecordedStream {
 public:
  // Starts the call at once. `deadline` (infinite = none) is the call's gRPC deadline.
  RecordedStream(v1::Tandem::Stub* stub, v1::GenerateRequest request,
                 absl::Duration deadline = absl::InfiniteDuration());
  ~RecordedStream();  // Joins (cancels first if still running).

  // Blocks until the call ends.
  void Join();
  // Tokens received so far (thread-safe).
  int tokens_received() const;
  // Time of the last chunk that carried tokens (InfinitePast before the first).
  absl::Time last_token_time() const;

  // After Join():
  const std::vector<int>& tokens() const { return tokens_; }
  const grpc::Status& status() const { return status_; }
  absl::Time started() const { return started_; }
  absl::Time ended() const { return ended_; }
  // Whether the final message (with stats) arrived.
  bool finished() const { return finished_; }
  const v1::RequestStats& stats() const { return stats_; }

 private:
  void Run(v1::Tandem::Stub* stub, v1::GenerateRequest request);

  grpc::ClientContext context_;
  mutable absl::Mutex mu_;
  std::vector<int> tokens_;
  absl::Time last_token_ = absl::InfinitePast();
  grpc::Status status_;
  absl::Time started_, ended_;
  bool finished_ = false;
  v1::RequestStats stats_;
  std::thread thread_;
};

// Waits until every stream received at least `tokens` tokens; false on timeout.
bool WaitForTokens(const std::vector<std::unique_ptr<RecordedStream>>& streams, int tokens,
                   absl::Duration timeout);

}  // namespace tandem::fault

#endif  // TANDEM_TESTS_FAULT_STREAM_RECORDER_H_
