#include "worker/test_util.h"

#include <cmath>
#include <random>

#include "absl/types/span.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/output_consumers.h"
#include "model/weights.h"
#include "spec/sampling.h"

namespace tandem {
namespace worker {
namespace testing {

absl::StatusOr<TestModel> LoadTestModel(const std::string& dir, int max_batch_tokens,
                                        size_t kv_bytes, int block_size) {
  absl::StatusOr<LlamaWeights> weights = LoadLlamaWeights(dir, 0, 1);
  if (!weights.ok()) return weights.status();
  TestModel out;
  out.backend = MakeCpuBackend(1);
  LlamaModelOptions options;
  options.max_batch_tokens = max_batch_tokens;
  options.kv_cache_bytes = kv_bytes;
  options.block_size = block_size;
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Create(*weights, out.backend.get(), nullptr, options);
  if (!model.ok()) return model.status();
  out.model = *std::move(model);
  return out;
}

absl::StatusOr<TestExecutor> LoadTestExecutor(const std::string& dir, int max_batch_tokens,
                                              size_t kv_bytes, int block_size) {
  absl::StatusOr<TestModel> model = LoadTestModel(dir, max_batch_tokens, kv_bytes, block_size);
  if (!model.ok()) return model.status();
  TestExecutor out;
  out.backend = std::move(model->backend);
  out.executor = std::make_unique<LocalExecutor>(std::move(model->model));
  return out;
}

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

v1::SequenceSampling Greedy(bool logprobs) {
  v1::SequenceSampling s;
  s.set_temperature(0);
  s.set_top_p(1);
  s.set_rule(v1::ACCEPTANCE_RULE_GREEDY);
  s.set_return_logprobs(logprobs);
  return s;
}

v1::SequenceSampling Sampled(float temperature, uint64_t seed, v1::AcceptanceRule rule, int top_k,
                             float top_p, bool logprobs) {
  v1::SequenceSampling s;
  s.set_temperature(temperature);
  s.set_top_k(top_k);
  s.set_top_p(top_p);
  s.set_seed(seed);
  s.set_rule(rule);
  s.set_return_logprobs(logprobs);
  return s;
}

v1::ProposedToken PointProposal(int32_t token) {
  v1::ProposedToken p;
  p.set_token(token);
  p.add_q_ids(token);
  p.add_q_probs(1.0f);
  return p;
}

std::vector<std::vector<float>> DecodeLogits(LlamaModel& model, const std::vector<int32_t>& tokens,
                                             uint64_t seq_id) {
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); ++i) {
    SequenceInput in;
    in.seq_id = seq_id;
    in.start_position = static_cast<int>(i);
    in.tokens = {tokens[i]};
    in.logit_indices = {0};
    if (!ForwardToHost(model, {in}, &logits).ok()) return {};
    out.push_back(logits);
  }
  (void)model.Release(seq_id);
  return out;
}

std::vector<int32_t> GreedyContinuation(LlamaModel& model, const std::vector<int32_t>& prompt,
                                        int n, uint64_t seq_id) {
  std::vector<int32_t> all = prompt, out;
  std::vector<float> logits;
  int fed = 0;
  while (static_cast<int>(out.size()) < n) {
    SequenceInput in;
    in.seq_id = seq_id;
    in.start_position = fed;
    in.tokens = {all[fed]};
    in.logit_indices = {0};
    if (!ForwardToHost(model, {in}, &logits).ok()) return {};
    ++fed;
    if (fed < static_cast<int>(all.size())) continue;  // Still feeding the prompt.
    const int32_t next = spec::Argmax(logits);
    out.push_back(next);
    all.push_back(next);
  }
  (void)model.Release(seq_id);
  return out;
}

double LogSoftmaxAt(const std::vector<float>& logits, int32_t token) {
  double max = logits[0];
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return static_cast<double>(logits[token]) - max - std::log(sum);
}

}  // namespace testing
}  // namespace worker
}  // namespace tandem
