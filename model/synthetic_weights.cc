#include "model/synthetic_weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <tuple>
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

// A tensor of SyntheticTensors and the field of LlamaWeights it fills.
struct Slot {
  SyntheticTensor tensor;
  HostTensor* field;
};

// The tensors of `model` in SyntheticTensors' order, each with its field of `w` (whose
// layers must be sized to the model). Value streams are numbered by first use of each
// (rows, cols, kind), so tensors of one shape and kind share their values.
std::vector<Slot> Slots(const SyntheticModel& model, LlamaWeights& w) {
  using Kind = SyntheticTensor::Kind;
  const LlamaConfig& c = model.config;
  const int n = model.tp_size;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  const int64_t q = c.num_heads / n * hd, kv = c.num_kv_heads / n * hd;
  const int64_t mlp = c.intermediate_size / n, vocab_local = c.vocab_size / n;
  std::map<std::tuple<int64_t, int64_t, Kind>, int> streams;
  std::vector<Slot> slots;
  auto add = [&](std::string name, int64_t rows, int64_t cols, Kind kind, HostTensor* field) {
    const int stream =
        streams.emplace(std::make_tuple(rows, cols, kind), int(streams.size())).first->second;
    slots.push_back({{std::move(name), rows, cols, kind, stream}, field});
  };
  add("model.embed_tokens.weight", c.vocab_size, hidden, Kind::kEmbedding, &w.embed_tokens);
  add("model.norm.weight", 1, hidden, Kind::kNorm, &w.final_norm);
  add("lm_head.weight", vocab_local, hidden, Kind::kMatrix, &w.lm_head);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[i];
    const std::string prefix = absl::StrCat("model.layers.", i, ".");
    add(prefix + "input_layernorm.weight", 1, hidden, Kind::kNorm, &l.input_norm);
    add(prefix + "post_attention_layernorm.weight", 1, hidden, Kind::kNorm, &l.post_attn_norm);
    add(prefix + "self_attn.q_proj.weight", q, hidden, Kind::kMatrix, &l.q_proj);
    add(prefix + "self_attn.k_proj.weight", kv, hidden, Kind::kMatrix, &l.k_proj);
    add(prefix + "self_attn.v_proj.weight", kv, hidden, Kind::kMatrix, &l.v_proj);
    add(prefix + "self_attn.o_proj.weight", hidden, q, Kind::kMatrix, &l.o_proj);
    add(prefix + "mlp.gate_proj.weight", mlp, hidden, Kind::kMatrix, &l.gate_proj);
    add(prefix + "mlp.up_proj.weight", mlp, hidden, Kind::kMatrix, &l.up_proj);
    add(prefix + "mlp.down_proj.weight", hidden, mlp, Kind::kMatrix, &l.down_proj);
  }
  return slots;
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

std::vector<SyntheticTensor> SyntheticTensors(const SyntheticModel& model) {
  LlamaWeights unused;
  unused.layers.resize(model.config.num_layers);
  std::vector<SyntheticTensor> tensors;
  for (const Slot& slot : Slots(model, unused)) tensors.push_back(slot.tensor);
  return tensors;
}

absl::StatusOr<HostTensor> MakeSyntheticTensor(const SyntheticTensor& tensor, uint64_t seed) {
  using Kind = SyntheticTensor::Kind;
  const float bound = tensor.kind == Kind::kMatrix ? std::sqrt(3.0f / float(tensor.cols)) : 1.0f;
  auto data = RandomBf16(size_t(tensor.rows * tensor.cols), bound, tensor.kind == Kind::kNorm,
                         seed + uint64_t(tensor.values));
  if (!data.ok()) return data.status();
  HostTensor t;
  t.data = (*data)->data();
  t.dtype = DType::kBF16;
  t.rows = tensor.rows;
  t.cols = tensor.cols;
  t.owner = *std::move(data);
  return t;
}

absl::StatusOr<LlamaWeights> MakeSyntheticWeights(const SyntheticModel& model, uint64_t seed) {
  LlamaWeights w;
  w.config = model.config;
  w.tp_rank = model.tp_rank;
  w.tp_size = model.tp_size;
  w.vocab_begin = int64_t(model.tp_rank) * (model.config.vocab_size / model.tp_size);
  w.layers.resize(model.config.num_layers);
  // One buffer per value stream, shared by every tensor that uses it.
  std::map<int, HostTensor> made;
  for (const Slot& slot : Slots(model, w)) {
    auto it = made.find(slot.tensor.values);
    if (it == made.end()) {
      auto tensor = MakeSyntheticTensor(slot.tensor, seed);
      if (!tensor.ok()) return tensor.status();
      it = made.emplace(slot.tensor.values, *std::move(tensor)).first;
    }
    *slot.field = it->second;
  }
  return w;
}

}  // namespace tandem
