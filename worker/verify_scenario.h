// A scripted greedy speculation scenario run against a live tandem.v1.Worker (target)
// over gRPC, shared by the multi-process tests and the worker benchmark.
#ifndef TANDEM_WORKER_VERIFY_SCENARIO_H_
#define TANDEM_WORKER_VERIFY_SCENARIO_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/v1/worker.grpc.pb.h"

namespace tandem {
namespace worker {
namespace testing {

struct ScenarioOptions {
  uint64_t base_id = 1;  // Sequence i has id base_id + i.
  int steps = 6;         // Verify steps per sequence.
  int k = 4;             // Proposals per step.
  bool batched = true;   // All sequences in one Verify per step, else one at a time.
  int vocab_size = 128;
};

// What one sequence saw: per step, its committed tokens and their log-probabilities.
struct SequenceTrace {
  std::vector<std::vector<int32_t>> committed;
  std::vector<std::vector<float>> logprobs;
  std::vector<double> server_compute_ms;  // Per step (the whole batch's figure).
};

// Prefills every prompt but its last token, then runs `steps` greedy verify steps.
// Step s of sequence i proposes the next k tokens of oracle[i] (the greedy
// continuation of prompts[i]) with proposal (s + i) % (k + 1) corrupted when < k, so
// steps accept 0..k proposals. The caller checks the committed tokens against the
// oracle. Errors carry the gRPC status.
absl::StatusOr<std::vector<SequenceTrace>> RunGreedyScenario(
    v1::Worker::Stub& stub, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<std::vector<int32_t>>& oracle, const ScenarioOptions& options);

// gRPC status to absl::Status.
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace testing
}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_VERIFY_SCENARIO_H_
