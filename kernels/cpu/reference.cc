#include "kernels/cpu/reference.h"

#include <algorithm>
#include <cmath>

namespace tandem {
namespace reference {

void MatMul(const float* x, int rows, const float* w, int out_dim, int in_dim, float* out) {
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out_dim; ++o) {
      double sum = 0;
      for (int k = 0; k < in_dim; ++k)
        sum += double(x[size_t(r) * in_dim + k]) * w[size_t(o) * in_dim + k];
      out[size_t(r) * out_dim + o] = float(sum);
    }
  }
}

void RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * dim;
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += double(xr[i]) * xr[i];
    const double inv_rms = 1.0 / std::sqrt(sum / dim + eps);
    for (int i = 0; i < dim; ++i) out[size_t(r) * dim + i] = float(weight[i] * xr[i] * inv_rms);
  }
}

void Rope(const std::vector<int32_t>& positions, float* x, int num_heads, int head_dim,
          const float* inv_freq) {
  const int half = head_dim / 2;
  for (size_t r = 0; r < positions.size(); ++r) {
    for (int h = 0; h < num_heads; ++h) {
      float* head = x + (r * num_heads + h) * head_dim;
      for (int j = 0; j < half; ++j) {
        // Hugging Face forms the angle in float32.
        const double angle = float(positions[r]) * inv_freq[j];
        const double c = std::cos(angle), s = std::sin(angle);
        const double x1 = head[j], x2 = head[j + half];
        head[j] = float(x1 * c - x2 * s);
        head[j + half] = float(x2 * c + x1 * s);
      }
    }
  }
}

std::vector<int> VisibleKeys(const StepPlan::Sequence& seq, int row_in_sequence) {
  std::vector<int> keys;
  for (int k = 0; k < seq.context_length; ++k) keys.push_back(k);
  if (seq.parents.empty()) {
    for (int j = 0; j <= row_in_sequence; ++j) keys.push_back(seq.context_length + j);
  } else {
    std::vector<int> chain;
    for (int a = row_in_sequence; a >= 0; a = seq.parents[a])
      chain.push_back(seq.context_length + a);
    std::sort(chain.begin(), chain.end());
    keys.insert(keys.end(), chain.begin(), chain.end());
  }
  return keys;
}

void Attention(const StepPlan& plan, const float* q, const KvLayout& layout, const float* k_cache,
               const float* v_cache, int num_heads, float scale, float* out) {
  const int hd = layout.head_dim;
  const int group = num_heads / layout.num_kv_heads;
  for (const StepPlan::Sequence& seq : plan.sequences) {
    for (int i = 0; i < seq.row_count; ++i) {
      const int r = seq.row_begin + i;
      const std::vector<int> keys = VisibleKeys(seq, i);
      for (int h = 0; h < num_heads; ++h) {
        const float* qh = q + (size_t(r) * num_heads + h) * hd;
        auto element = [&](const float* cache, int key) {
          const int64_t slot = int64_t(seq.block_table[key / plan.block_size]) * plan.block_size +
                               key % plan.block_size;
          return cache + (slot * layout.num_kv_heads + h / group) * hd;
        };
        std::vector<double> scores(keys.size());
        double max = -INFINITY;
        for (size_t j = 0; j < keys.size(); ++j) {
          const float* k = element(k_cache, keys[j]);
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += double(qh[d]) * k[d];
          scores[j] = dot * scale;
          max = std::max(max, scores[j]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (int d = 0; d < hd; ++d) {
          double acc = 0;
          for (size_t j = 0; j < keys.size(); ++j) acc += scores[j] * element(v_cache, keys[j])[d];
          out[(size_t(r) * num_heads + h) * hd + d] = float(acc / sum);
        }
      }
    }
  }
}

void Softmax(const float* x, int rows, int cols, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * cols;
    double max = -INFINITY;
    for (int i = 0; i < cols; ++i) max = std::max(max, double(xr[i]));
    double sum = 0;
    for (int i = 0; i < cols; ++i) sum += std::exp(xr[i] - max);
    for (int i = 0; i < cols; ++i) out[size_t(r) * cols + i] = float(std::exp(xr[i] - max) / sum);
  }
}

void SiluMul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = float(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace reference
}  // namespace tandem
