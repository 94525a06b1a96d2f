// What a tandem-worker loads and runs: the host weights of its rank (a checkpoint or
// synthetic weights), the name it reports, and the options of its LlamaModel, all from
// WorkerOptions.
#ifndef TANDEM_WORKER_WORKER_MODEL_H_
#define TANDEM_WORKER_WORKER_MODEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/llama.h"
#include "model/weights.h"
#include "worker/worker_options.h"

namespace tandem {
namespace worker {

// This rank's weights: the checkpoint of options.model_dir (its --rank slice of
// --tp_size), or the synthetic weights of options.synthetic (announced on stderr as
// "SYNTHETIC WEIGHTS ... NOT A MODEL"). Errors keep the loader's code and name the flag
// ("--model_dir=DIR: ..." or "--synthetic ...").
absl::StatusOr<LlamaWeights> LoadWorkerWeights(const WorkerOptions& options);

// The name the worker reports (Describe, logs): the model directory's base name, or
// "synthetic:<spec> (NOT A MODEL)".
std::string WorkerModelName(const WorkerOptions& options);

// The LlamaModel options of a worker: KV budget (kv_cache_mb MiB) and dtype, block
// size, rows per forward pass, and the step timeout as the collective timeout.
LlamaModelOptions WorkerModelOptions(const WorkerOptions& options);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_WORKER_MODEL_H_
