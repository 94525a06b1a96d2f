// Helpers for the worker tests: a single-process model over a checkpoint, request
// builders and an independent plain-decoding reference.
#ifndef TANDEM_WORKER_TEST_UTIL_H_
#define TANDEM_WORKER_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/llama.h"
#include "tandem/v1/worker.pb.h"
#include "worker/model_executor.h"

namespace tandem {
namespace worker {
namespace testing {

// Random checkpoint whose dimensions divide by 4 (vocab 128).
inline constexpr char kTpCheckpoint[] = "tests/reference/checkpoints/tiny_f32_tp";
// The bundled target (2 KV heads: on 4 ranks each holds one replicated KV head).
inline constexpr char kBundledTarget[] = "models/target";
// Random checkpoint with a larger vocabulary (1000), for sparse proposals.
inline constexpr char kWideVocabCheckpoint[] = "tests/reference/checkpoints/tiny_f16_hd20_kv1";

// A CPU LlamaModel (1 thread, tp = 1) with its backend; the model is destroyed first.
struct TestModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
};
absl::StatusOr<TestModel> LoadTestModel(const std::string& dir, int max_batch_tokens = 256,
                                        size_t kv_bytes = size_t{4} << 20, int block_size = 8);

// A LocalExecutor over LoadTestModel.
struct TestExecutor {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<LocalExecutor> executor;
};
absl::StatusOr<TestExecutor> LoadTestExecutor(const std::string& dir, int max_batch_tokens = 256,
                                              size_t kv_bytes = size_t{4} << 20,
                                              int block_size = 8);

// Deterministic pseudo-random tokens in [0, vocab).
std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed);

// Sampling settings: greedy (rule greedy), or temperature sampling with `rule`.
v1::SequenceSampling Greedy(bool logprobs = false);
v1::SequenceSampling Sampled(float temperature, uint64_t seed,
                             v1::AcceptanceRule rule = v1::ACCEPTANCE_RULE_REJECTION, int top_k = 0,
                             float top_p = 1.0f, bool logprobs = false);

// A proposal with point-mass q.
v1::ProposedToken PointProposal(int32_t token);

// Independent reference by plain decoding on its own model: logits [tokens.size(),
// vocab] of a causal forward over `tokens` fed one token per call (sequence id 1).
std::vector<std::vector<float>> DecodeLogits(LlamaModel& model, const std::vector<int32_t>& tokens,
                                             uint64_t seq_id = 1);
// Greedy continuation: `n` argmax tokens after `prompt`, one token per forward pass.
std::vector<int32_t> GreedyContinuation(LlamaModel& model, const std::vector<int32_t>& prompt,
                                        int n, uint64_t seq_id = 1);

// log_softmax(logits)[token] in double.
double LogSoftmaxAt(const std::vector<float>& logits, int32_t token);

}  // namespace testing
}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_TEST_UTIL_H_
