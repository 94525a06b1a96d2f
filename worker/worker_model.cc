#include "worker/worker_model.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "model/synthetic_weights.h"

namespace tandem {
namespace worker {

absl::StatusOr<LlamaWeights> LoadWorkerWeights(const WorkerOptions& options) {
  if (!options.synthetic.empty()) {
    absl::StatusOr<SyntheticModel> model = ResolveSyntheticModel(options);
    if (!model.ok()) return model.status();
    std::fprintf(stderr,
                 "tandem-worker: SYNTHETIC WEIGHTS (%s, %.1f GB): random values with real "
                 "shapes, NOT A MODEL; for benchmarks only\n",
                 model->name.c_str(), SyntheticWeightBytes(*model) / 1e9);
    return MakeSyntheticWeights(*model, /*seed=*/1);
  }
  absl::StatusOr<LlamaWeights> weights =
      LoadLlamaWeights(options.model_dir, options.rank, options.tp_size);
  if (!weights.ok()) {
    return absl::Status(weights.status().code(), absl::StrCat("--model_dir=", options.model_dir,
                                                              ": ", weights.status().message()));
  }
  return weights;
}

std::string WorkerModelName(const WorkerOptions& options) {
  if (!options.synthetic.empty()) {
    return absl::StrCat("synthetic:", options.synthetic, " (NOT A MODEL)");
  }
  std::string dir = options.model_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir.substr(dir.rfind('/') + 1);  // npos + 1 = 0: no slash.
}

LlamaModelOptions WorkerModelOptions(const WorkerOptions& options) {
  LlamaModelOptions model_options;
  model_options.kv_cache_bytes = size_t(options.kv_cache_mb) << 20;
  model_options.kv_dtype = options.KvDType();
  model_options.block_size = options.block_size;
  model_options.max_batch_tokens = options.max_batch_tokens;
  model_options.collective_timeout = options.step_timeout;
  return model_options;
}

}  // namespace worker
}  // namespace tandem
