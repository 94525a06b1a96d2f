// The coordinator's engine flags (batching, pipelining, speculation, cost model) and
// the EngineOptions they make, checked: what tandem-coordinator's main reads.
#ifndef TANDEM_COORDINATOR_ENGINE_FLAGS_H_
#define TANDEM_COORDINATOR_ENGINE_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "coordinator/engine.h"

// Also read outside the engine's options (metrics, validation limits, worker calls).
ABSL_DECLARE_FLAG(int, max_k);
ABSL_DECLARE_FLAG(int, max_new_tokens_limit);
ABSL_DECLARE_FLAG(double, step_timeout_s);
ABSL_DECLARE_FLAG(double, worker_wait_s);

namespace tandem::coordinator {

// The engine's options from the flags, with `stop_token_ids` (the model directory's, see
// model/generation_config.h). An out-of-range flag is INVALID_ARGUMENT naming it and its
// bounds.
absl::StatusOr<EngineOptions> EngineOptionsFromFlags(std::vector<int> stop_token_ids);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_ENGINE_FLAGS_H_
