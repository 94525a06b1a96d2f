#include "model/llama_test_util.h"

#include <cmath>
#include <memory>
#include <random>

namespace tandem {
namespace {

HostTensor RandomTensor(int64_t rows, int64_t cols, double mean, double scale,
                        std::mt19937_64* rng) {
  auto data = std::make_shared<std::vector<float>>(rows * cols);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (float& v : *data) v = static_cast<float>(mean + scale * uniform(*rng));
  HostTensor t;
  t.data = data->data();
  t.dtype = DType::kF32;
  t.rows = rows;
  t.cols = cols;
  t.owner = data;
  return t;
}

using Vec = std::vector<double>;

// y = W x for W [rows, cols] (nn.Linear layout).
Vec Linear(const HostTensor& w, const Vec& x) {
  Vec y(w.rows, 0.0);
  for (int64_t o = 0; o < w.rows; ++o) {
    double sum = 0;
    for (int64_t i = 0; i < w.cols; ++i) sum += double(w.At(o, i)) * x[i];
    y[o] = sum;
  }
  return y;
}

Vec RmsNorm(const Vec& x, const HostTensor& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * double(w.At(0, i));
  return y;
}

void Rope(Vec* x, int heads, int head_dim, int position, const std::vector<float>& inv_freq) {
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    double* v = x->data() + h * head_dim;
    for (int j = 0; j < half; ++j) {
      const double angle = double(position) * double(inv_freq[j]);
      const double c = std::cos(angle), s = std::sin(angle);
      const double x1 = v[j], x2 = v[j + half];
      v[j] = x1 * c - x2 * s;
      v[j + half] = x2 * c + x1 * s;
    }
  }
}

}  // namespace

LlamaConfig SmallTestConfig() {
  LlamaConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.max_position_embeddings = 256;
  c.eos_token_ids = {2};
  c.torch_dtype = "float32";
  return c;
}

LlamaWeights RandomLlamaWeights(const LlamaConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  const double in_scale = 1.7 / std::sqrt(double(hidden));
  LlamaWeights w;
  w.config = c;
  w.embed_tokens = RandomTensor(c.vocab_size, hidden, 0.0, 1.0, &rng);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights lw;
    lw.input_norm = RandomTensor(1, hidden, 1.0, 0.2, &rng);
    lw.q_proj = RandomTensor(c.num_heads * hd, hidden, 0.0, 2 * in_scale, &rng);
    lw.k_proj = RandomTensor(c.num_kv_heads * hd, hidden, 0.0, 2 * in_scale, &rng);
    lw.v_proj = RandomTensor(c.num_kv_heads * hd, hidden, 0.0, in_scale, &rng);
    lw.o_proj = RandomTensor(hidden, c.num_heads * hd, 0.0,
                             1.7 / std::sqrt(double(c.num_heads * hd)), &rng);
    lw.post_attn_norm = RandomTensor(1, hidden, 1.0, 0.2, &rng);
    lw.gate_proj = RandomTensor(c.intermediate_size, hidden, 0.0, in_scale, &rng);
    lw.up_proj = RandomTensor(c.intermediate_size, hidden, 0.0, in_scale, &rng);
    lw.down_proj = RandomTensor(hidden, c.intermediate_size, 0.0,
                                1.7 / std::sqrt(double(c.intermediate_size)), &rng);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = RandomTensor(1, hidden, 1.0, 0.2, &rng);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens
                                    : RandomTensor(c.vocab_size, hidden, 0.0, in_scale, &rng);
  return w;
}

std::vector<double> ReferenceLogits(const LlamaWeights& w, const std::vector<int32_t>& tokens,
                                    const std::vector<int32_t>& positions) {
  const LlamaConfig& c = w.config;
  const int hd = c.head_dim, group = c.num_heads / c.num_kv_heads;
  const std::vector<float> inv_freq = RopeInverseFrequencies(c);
  const int n = static_cast<int>(tokens.size());
  std::vector<Vec> x(n, Vec(c.hidden_size));
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < c.hidden_size; ++i) x[t][i] = w.embed_tokens.At(tokens[t], i);
  }
  for (const LayerWeights& l : w.layers) {
    std::vector<Vec> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      const Vec h = RmsNorm(x[t], l.input_norm, c.rms_norm_eps);
      q[t] = Linear(l.q_proj, h);
      k[t] = Linear(l.k_proj, h);
      v[t] = Linear(l.v_proj, h);
      const int position = positions.empty() ? t : positions[t];
      Rope(&q[t], c.num_heads, hd, position, inv_freq);
      Rope(&k[t], c.num_kv_heads, hd, position, inv_freq);
    }
    for (int t = 0; t < n; ++t) {
      Vec attn(c.num_heads * hd, 0.0);
      for (int h = 0; h < c.num_heads; ++h) {
        const int kvh = h / group;
        Vec scores(t + 1);
        double max_score = -1e300;
        for (int s = 0; s <= t; ++s) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[t][h * hd + d] * k[s][kvh * hd + d];
          scores[s] = dot / std::sqrt(double(hd));
          max_score = std::max(max_score, scores[s]);
        }
        double denom = 0;
        for (double& sc : scores) denom += (sc = std::exp(sc - max_score));
        for (int s = 0; s <= t; ++s) {
          for (int d = 0; d < hd; ++d) {
            attn[h * hd + d] += scores[s] / denom * v[s][kvh * hd + d];
          }
        }
      }
      const Vec o = Linear(l.o_proj, attn);
      for (int i = 0; i < c.hidden_size; ++i) x[t][i] += o[i];
      const Vec h2 = RmsNorm(x[t], l.post_attn_norm, c.rms_norm_eps);
      const Vec gate = Linear(l.gate_proj, h2), up = Linear(l.up_proj, h2);
      Vec act(gate.size());
      for (size_t i = 0; i < gate.size(); ++i) {
        act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      }
      const Vec down = Linear(l.down_proj, act);
      for (int i = 0; i < c.hidden_size; ++i) x[t][i] += down[i];
    }
  }
  std::vector<double> logits;
  logits.reserve(size_t(n) * c.vocab_size);
  for (int t = 0; t < n; ++t) {
    const Vec out = Linear(w.lm_head, RmsNorm(x[t], w.final_norm, c.rms_norm_eps));
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

std::vector<double> ReferenceLmHead(const LlamaWeights& w, const std::vector<float>& hidden) {
  const int h = w.config.hidden_size;
  std::vector<double> logits;
  for (size_t r = 0; r + h <= hidden.size(); r += h) {
    const Vec out = Linear(w.lm_head, Vec(hidden.begin() + r, hidden.begin() + r + h));
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

absl::Status HostOutputsConsumer::Consume(Backend& backend, const ForwardOutputs& outputs) {
  absl::Status status = backend.CopyLogitsToHost(outputs.logits, &logits, &staging_);
  if (!status.ok()) return status;
  hidden.assign(size_t(outputs.logits.rows) * outputs.hidden_size, 0.0f);
  if (hidden.empty()) return absl::OkStatus();
  if (outputs.hidden_rows == nullptr) return absl::InternalError("hidden rows missing");
  return backend.CopyToHost(outputs.hidden_rows, hidden.data(), hidden.size() * sizeof(float));
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % vocab);
  return tokens;
}

SequenceInput Seq(uint64_t id, int start, std::vector<int32_t> tokens,
                  std::vector<int32_t> logit_indices, std::vector<int32_t> parents) {
  SequenceInput in;
  in.seq_id = id;
  in.start_position = start;
  in.tokens = std::move(tokens);
  in.logit_indices = std::move(logit_indices);
  in.parents = std::move(parents);
  return in;
}

}  // namespace tandem
