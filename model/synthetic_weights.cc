#include "model/synthetic_weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "model/float16.h"

namespace tandem {
namespace {

LlamaConfig BaseConfig(int layers, int hidden, int heads, int kv_heads, int mlp, int vocab) {
  LlamaConfig c;
  c.architecture = "LlamaForCausalLM";
  c.num_layers = layers;
  c.hidden_size = hidden;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.intermediate_size = mlp;
  c.vocab_size = vocab;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.max_position_embeddings = 4096;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.torch_dtype = "bfloat16";
  return c;
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// `count` bf16 values uniform in [-bound, bound] (or all equal to `bound` when
// constant), generated in parallel chunks seeded from (seed, chunk) so the result does
// not depend on the thread count.
absl::StatusOr<std::shared_ptr<std::vector<uint16_t>>> RandomBf16(size_t count, float bound,
                                                                  bool constant, uint64_t seed) {
  std::shared_ptr<std::vector<uint16_t>> data;
  try {
    data = std::make_shared<std::vector<uint16_t>>(count);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("synthetic weights: cannot allocate ", count * 2, " bytes of host memory"));
  }
  constexpr size_t kChunk = size_t(1) << 20;
  const size_t chunks = (count + kChunk - 1) / kChunk;
  const size_t threads =
      std::max<size_t>(1, std::min<size_t>(chunks, std::thread::hardware_concurrency()));
  auto fill = [&](size_t first) {
    for (size_t c = first; c < chunks; c += threads) {
      uint64_t state = seed * 0x100000001b3ull + c;
      const size_t end = std::min(count, (c + 1) * kChunk);
      for (size_t i = c * kChunk; i < end; ++i) {
        // 24 random bits -> [-1, 1).
        const float u = float(SplitMix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
        (*data)[i] = FloatToBFloat16(constant ? bound : u * bound);
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(fill, t);
  fill(0);
  for (std::thread& t : pool) t.join();
  return data;
}

}  // namespace

absl::StatusOr<SyntheticModel> ParseSyntheticModel(const std::string& spec) {
  SyntheticModel model;
  model.name = spec;
  std::string base = spec;
  const size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    base = spec.substr(0, colon);
    const std::vector<std::string> parts = absl::StrSplit(spec.substr(colon + 1), '/');
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &model.tp_rank) ||
        !absl::SimpleAtoi(parts[1], &model.tp_size) || model.tp_size < 1 || model.tp_rank < 0 ||
        model.tp_rank >= model.tp_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic model '", spec, "': expected <model>:R/N with 0 <= R < N"));
    }
  }
  if (base == "llama-2-70b-shard") base = "llama-2-70b";
  if (base == "llama-2-7b") {
    model.config = BaseConfig(32, 4096, 32, 32, 11008, 32000);
  } else if (base == "llama-2-70b") {
    model.config = BaseConfig(80, 8192, 64, 8, 28672, 32000);
  } else if (base == "llama-1b") {
    model.config = BaseConfig(22, 2048, 32, 4, 5632, 2048);
  } else if (base == "tiny") {
    model.config = BaseConfig(2, 64, 4, 2, 128, 256);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic model '", spec, "': unknown model '", base,
                     "' (llama-1b, llama-2-7b, llama-2-70b, llama-2-70b-shard or tiny)"));
  }
  const LlamaConfig& c = model.config;
  const int n = model.tp_size;
  if (c.num_heads % n != 0 || c.num_kv_heads % n != 0 || c.intermediate_size % n != 0 ||
      c.vocab_size % n != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "synthetic model '", spec, "': ", n, " ranks do not divide ", c.num_heads, " heads, ",
        c.num_kv_heads, " KV heads, MLP ", c.intermediate_size, " and vocabulary ", c.vocab_size));
  }
  return model;
}

int64_t SyntheticWeightBytes(const SyntheticModel& model) {
  const LlamaConfig& c = model.config;
  const int64_t n = model.tp_size, hidden = c.hidden_size, hd = c.head_dim;
  const int64_t q = c.num_heads / n * hd, kv = c.num_kv_heads / n * hd;
  const int64_t mlp = c.intermediate_size / n;
  const int64_t per_layer = 2 * hidden + 2 * q * hidden + 2 * kv * hidden + 3 * mlp * hidden;
  const int64_t values = int64_t(c.vocab_size) * hidden + hidden +
                         int64_t(c.vocab_size) / n * hidden + per_layer * c.num_layers;
  return 2 * values;
}

absl::StatusOr<LlamaWeights> MakeSyntheticWeights(const SyntheticModel& model, uint64_t seed) {
  const LlamaConfig& c = model.config;
  const int n = model.tp_size;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  // One buffer per distinct (rows, cols, kind), shared by every layer.
  std::map<std::tuple<int64_t, int64_t, int>, HostTensor> cache;
  absl::Status error;
  auto tensor = [&](int64_t rows, int64_t cols, int kind) -> HostTensor {
    // kind: 0 = matrix, 1 = embedding, 2 = norm.
    auto key = std::make_tuple(rows, cols, kind);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const float bound = kind == 2 ? 1.0f : kind == 1 ? 1.0f : std::sqrt(3.0f / float(cols));
    auto data = RandomBf16(size_t(rows * cols), bound, kind == 2, seed + cache.size());
    HostTensor t;
    if (!data.ok()) {
      if (error.ok()) error = data.status();
      return t;
    }
    t.data = (*data)->data();
    t.dtype = DType::kBF16;
    t.rows = rows;
    t.cols = cols;
    t.owner = *std::move(data);
    cache.emplace(key, t);
    return t;
  };
  LlamaWeights w;
  w.config = c;
  w.tp_rank = model.tp_rank;
  w.tp_size = n;
  const int64_t q = c.num_heads / n * hd, kv = c.num_kv_heads / n * hd;
  const int64_t mlp = c.intermediate_size / n, vocab_local = c.vocab_size / n;
  w.embed_tokens = tensor(c.vocab_size, hidden, 1);
  w.final_norm = tensor(1, hidden, 2);
  w.lm_head = tensor(vocab_local, hidden, 0);
  w.vocab_begin = int64_t(model.tp_rank) * vocab_local;
  w.layers.resize(c.num_layers);
  for (LayerWeights& l : w.layers) {
    l.input_norm = tensor(1, hidden, 2);
    l.post_attn_norm = l.input_norm;
    l.q_proj = tensor(q, hidden, 0);
    l.k_proj = tensor(kv, hidden, 0);
    l.v_proj = tensor(kv, hidden, 0);  // Same buffer as k_proj (same shape).
    l.o_proj = tensor(hidden, q, 0);
    l.gate_proj = tensor(mlp, hidden, 0);
    l.up_proj = tensor(mlp, hidden, 0);
    l.down_proj = tensor(hidden, mlp, 0);
  }
  if (!error.ok()) return error;
  return w;
}

}  // namespace tandem
