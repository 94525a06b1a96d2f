// Model forward-pass benchmark on the CPU backend.
//
//   bazel run //bench:model_bench -- --threads=2
//
// For each model directory: prefill throughput, decode throughput at batch 1, the
// verify cost ratio nu(K) = T(forward of K+1 positions) / T(forward of 1) for K = 1..8,
// decode throughput for batches of 1..32 sequences, and matrix-multiply GFLOP/s
// against this machine's float32 FMA peak measured in the same run. Every figure is
// the median of repeated timed calls after a warm-up call. Steady state: each timed
// call starts at the same position (the model rolls the cache back through
// start_position), so repeated calls see identical context lengths.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/memory_bandwidth.h"
#include "bench/peak_flops.h"
#include "bench/timing_backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/llama.h"
#include "model/output_consumers.h"
#include "model/synthetic_weights.h"
#include "model/weight_format.h"
#include "model/weights.h"

ABSL_FLAG(int, threads, 0, "CPU backend threads (0 = one per hardware thread)");
ABSL_FLAG(std::string, models, "models/target,models/draft",
          "Comma-separated Hugging Face model directories");
ABSL_FLAG(int, prompt_tokens, 256, "Prompt length for the prefill figure");
ABSL_FLAG(int, context, 128, "Cached context length for decode, verify and batch figures");
ABSL_FLAG(int, max_k, 8, "Largest draft length K for nu(K)");
ABSL_FLAG(int, max_batch, 32, "Largest decode batch (powers of two up to it)");
ABSL_FLAG(double, min_seconds, 0.3, "Least timed seconds per figure");
ABSL_FLAG(double, peak_seconds, 0.2, "Seconds per peak-FLOPS measurement");
ABSL_FLAG(std::string, synthetic, "",
          "Comma-separated synthetic models (model/synthetic_weights.h, e.g. llama-1b) to "
          "bench instead of --models");
ABSL_FLAG(std::string, weight_format, "",
          "Comma-separated formats (f32, f16, bf16, q8_0, q4_0) the linear matrices are converted "
          "to, one run each; empty = as stored (bf16 for --synthetic)");
ABSL_FLAG(std::string, kv_dtype, "f32", "KV cache element type: f32, f16 or bf16");
ABSL_FLAG(int, bandwidth_mb, 256, "Array size in MiB of the memory-bandwidth measurement");
ABSL_FLAG(bool, profile, false,
          "Also print the time per backend op for forwards of 1 and K+1 positions");

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double median = 0;  // Seconds per call.
  double best = 0;    // Fastest call: the least disturbed by other load on the machine.
};

// Prints `what: status` and ends the program (a benchmark has no partial result).
[[noreturn]] void Die(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "model_bench: %s: %s\n", what, status.ToString().c_str());
  std::exit(1);
}

// Times calls of `fn` (at least 5 and `min_seconds` in all) after one warm-up call.
// Aborts the program on an error (a benchmark has no partial result).
Timing Measure(const std::function<absl::Status()>& fn) {
  auto check = [](const absl::Status& status) {
    if (!status.ok()) Die("timed call", status);
  };
  check(fn());
  std::vector<double> times;
  const double min_seconds = absl::GetFlag(FLAGS_min_seconds);
  double total = 0;
  while (times.size() < 5 || total < min_seconds) {
    const auto start = Clock::now();
    check(fn());
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    times.push_back(t);
    total += t;
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times[0]};
}

double MedianSeconds(const std::function<absl::Status()>& fn) { return Measure(fn).median; }

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = 3 + static_cast<int32_t>(rng() % (vocab - 3));
  return tokens;
}

SequenceInput Seq(uint64_t id, int start, std::vector<int32_t> tokens,
                  std::vector<int32_t> logit_indices) {
  SequenceInput in;
  in.seq_id = id;
  in.start_position = start;
  in.tokens = std::move(tokens);
  in.logit_indices = std::move(logit_indices);
  return in;
}

std::vector<int32_t> Iota(int n) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Prints the mean time per backend op of forwards of 1 and k+1 positions at `context`.
void Profile(const LlamaWeights& weights, Backend* inner, const LlamaModelOptions& options,
             int context, int k, const std::vector<int32_t>& tokens) {
  bench::TimingBackend timing(inner);
  auto model = LlamaModel::Create(weights, &timing, nullptr, options);
  if (!model.ok()) Die("profile model", model.status());
  std::vector<float> logits;
  const auto slice = [&](int begin, int end) {
    return std::vector<int32_t>(tokens.begin() + begin, tokens.begin() + end);
  };
  if (absl::Status s = ForwardToHost(**model, {Seq(1, 0, slice(0, context), {})}, &logits);
      !s.ok()) {
    Die("profile prefill", s);
  }
  std::printf("profile (us per forward)  %-10s", "rows:");
  double per_op[2][bench::TimingBackend::kNumOps] = {};
  double wall[2] = {};
  for (int pass = 0; pass < 2; ++pass) {
    const int rows = pass == 0 ? 1 : k + 1;
    std::printf(" %8d", rows);
    timing.Reset();
    constexpr int kCalls = 200;
    const auto start = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
      if (absl::Status s = ForwardToHost(
              **model, {Seq(1, context, slice(context, context + rows), Iota(rows))}, &logits);
          !s.ok()) {
        Die("profile forward", s);
      }
    }
    wall[pass] = std::chrono::duration<double>(Clock::now() - start).count() / kCalls;
    for (int op = 0; op < bench::TimingBackend::kNumOps; ++op) {
      per_op[pass][op] = timing.seconds(op) / kCalls;
    }
  }
  std::printf("\n");
  for (int op = 0; op < bench::TimingBackend::kNumOps; ++op) {
    std::printf("  %-34s %8.1f %8.1f\n", bench::TimingBackend::kNames[op], per_op[0][op] * 1e6,
                per_op[1][op] * 1e6);
  }
  double ops[2] = {};
  for (int pass = 0; pass < 2; ++pass) {
    for (int op = 0; op < bench::TimingBackend::kNumOps; ++op) ops[pass] += per_op[pass][op];
  }
  std::printf("  %-34s %8.1f %8.1f\n", "model code (wall - ops)", (wall[0] - ops[0]) * 1e6,
              (wall[1] - ops[1]) * 1e6);
  std::printf("  %-34s %8.1f %8.1f\n", "wall", wall[0] * 1e6, wall[1] * 1e6);
}

// Matrix-multiply GFLOP/s of the backend on rows x `t` (a weight in its stored format),
// from the fastest call (the least disturbed by other load).
double MatMulGflops(Backend* backend, int rows, const HostTensor& t) {
  const int64_t out = t.rows, cols = t.cols;
  auto w = UploadHostTensor(backend, t);
  auto x = backend->Allocate(size_t(rows) * cols * sizeof(float));
  auto y = backend->Allocate(size_t(rows) * out * sizeof(float));
  if (!w.ok() || !x.ok() || !y.ok()) return 0;
  const double seconds = Measure([&] {
                           backend->MatMul(x->f32(), rows, *w, y->f32());
                           return backend->Synchronize();
                         }).best;
  return 2.0 * rows * out * cols / seconds * 1e-9;
}

// Resident set size of this process in bytes (VmRSS), 0 if unknown.
double ResidentBytes() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof(line), status) != nullptr) {
    if (std::sscanf(line, "VmRSS: %lf kB", &kb) == 1) break;
  }
  std::fclose(status);
  return kb * 1024;
}

// Benches the model of `host` (taken: its tensors are released once the model holds its
// own copies, so the resident memory counts what a worker keeps; kept with --profile,
// which builds a second model from them).
void BenchModel(const std::string& name, LlamaWeights host, int threads,
                const bench::PeakFlops& peak, const bench::MemoryBandwidth& bandwidth) {
  LlamaWeights* weights = &host;
  const LlamaConfig c = weights->config;
  CpuBackend cpu(threads);
  Backend* backend = &cpu;
  const int prompt = absl::GetFlag(FLAGS_prompt_tokens);
  const int context = absl::GetFlag(FLAGS_context);
  const int max_k = absl::GetFlag(FLAGS_max_k);
  const int max_batch = absl::GetFlag(FLAGS_max_batch);
  LlamaModelOptions options;
  options.max_batch_tokens = std::max({prompt, context * max_batch, max_k + 1});
  auto kv_dtype = ParseWeightFormat(absl::GetFlag(FLAGS_kv_dtype));  // Same spellings.
  if (!kv_dtype.ok()) {
    std::fprintf(stderr, "model_bench: --kv_dtype: %s\n", kv_dtype.status().ToString().c_str());
    std::exit(1);
  }
  options.kv_dtype = *kv_dtype;
  options.kv_cache_bytes =
      KvBytesPerBlock(c.num_layers, options.block_size, c.num_kv_heads, c.head_dim,
                      DTypeSize(options.kv_dtype)) *
      size_t((std::max(prompt, context + max_k + 1) / options.block_size + 2) * (max_batch + 2));
  auto model_or = LlamaModel::Create(*weights, backend, nullptr, options);
  if (!model_or.ok()) {
    std::fprintf(stderr, "model_bench: %s\n", model_or.status().ToString().c_str());
    std::exit(1);
  }
  LlamaModel& model = **model_or;
  std::vector<float> logits;
  const std::vector<int32_t> tokens =
      RandomTokens(std::max(prompt, context + max_k + 1), c.vocab_size, 1);
  const auto slice = [&](int begin, int end) {
    return std::vector<int32_t>(tokens.begin() + begin, tokens.begin() + end);
  };

  const double weight_bytes = double(WeightBytes(*weights));
  // A decode step reads every weight once except the embedding (one row per token).
  const double streamed_bytes =
      weight_bytes - (c.tie_word_embeddings ? 0.0
                                            : double(weights->embed_tokens.numel()) *
                                                  DTypeSize(weights->embed_tokens.dtype));
  const DType matrix_dtype = weights->layers[0].q_proj.dtype;
  const HostTensor up = weights->layers[0].up_proj;  // For the matmul figures below.
  const bool keep_host = absl::GetFlag(FLAGS_profile);
  if (!keep_host) *weights = LlamaWeights{};
  std::printf(
      "\n== %s: %d layers, hidden %d, heads %d/%d, vocab %d, %.2fM parameters, "
      "%d threads, %s matrices, %s KV, weights %.3f GB\n  %s\n",
      name.c_str(), c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.vocab_size,
      c.NumParameters() / 1e6, threads, DTypeName(matrix_dtype), DTypeName(options.kv_dtype),
      weight_bytes * 1e-9, cpu.Description().c_str());

  // Prefill: the whole prompt in one forward, logits of the last position.
  const double t_prefill = MedianSeconds(
      [&] { return ForwardToHost(model, {Seq(1, 0, slice(0, prompt), {prompt - 1})}, &logits); });
  // Matmul parameters (everything but the embedding table and norms).
  const double matmul_params =
      double(c.num_layers) *
      (double(c.hidden_size) * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim +
       double(c.num_heads) * c.head_dim * c.hidden_size +
       3.0 * c.hidden_size * c.intermediate_size);
  const double prefill_flops = 2.0 * matmul_params * prompt + 2.0 * c.hidden_size * c.vocab_size +
                               2.0 * c.num_layers * c.num_heads * c.head_dim * double(prompt) *
                                   (prompt + 1);  // QK^T and PV, causal.
  const double prefill_gflops = prefill_flops / t_prefill * 1e-9;
  std::printf("prefill %d tokens: %8.2f ms  %9.0f tokens/s  %6.2f GFLOP/s (%.0f%% of peak", prompt,
              t_prefill * 1e3, prompt / t_prefill, prefill_gflops,
              100.0 * prefill_gflops / peak.gflops_all);
  if (peak.gflops_all_512 > 0) {
    std::printf(", %.0f%% of the 512-bit peak", 100.0 * prefill_gflops / peak.gflops_all_512);
  }
  std::printf(")\n");

  // Decode and verify at a fixed context.
  if (!ForwardToHost(model, {Seq(2, 0, slice(0, context), {})}, &logits).ok()) std::exit(1);
  std::vector<Timing> verify(max_k + 1);
  for (int k = 0; k <= max_k; ++k) {
    verify[k] = Measure([&] {
      return ForwardToHost(model, {Seq(2, context, slice(context, context + k + 1), Iota(k + 1))},
                           &logits);
    });
  }
  std::printf("decode batch 1 at context %d: %.3f ms/token, %.1f tokens/s\n", context,
              verify[0].median * 1e3, 1.0 / verify[0].median);
  const double gbps = streamed_bytes / verify[0].median * 1e-9;
  std::printf(
      "  weights streamed: %.1f GB/s = %.0f%% of triad %.1f GB/s, %.0f%% of read %.1f GB/s "
      "(best call: %.1f GB/s)\n",
      gbps, 100 * gbps / bandwidth.triad_gbps, bandwidth.triad_gbps,
      100 * gbps / bandwidth.read_gbps, bandwidth.read_gbps,
      streamed_bytes / verify[0].best * 1e-9);
  std::printf("verify cost nu(K) = T(K+1 positions) / T(1):\n  K:          ");
  for (int k = 1; k <= max_k; ++k) std::printf(" %6d", k);
  std::printf("\n  nu (median):");
  for (int k = 1; k <= max_k; ++k) std::printf(" %6.2f", verify[k].median / verify[0].median);
  std::printf("\n  nu (best):  ");
  for (int k = 1; k <= max_k; ++k) std::printf(" %6.2f", verify[k].best / verify[0].best);
  std::printf("\n");

  // Decode batches: B sequences at the same context, one new token each.
  std::printf("decode batch   ms/step   tokens/s\n");
  for (int b = 1; b <= max_batch; b *= 2) {
    std::vector<SequenceInput> prefill, step;
    for (int s = 0; s < b; ++s) {
      prefill.push_back(Seq(100 + s, 0, slice(0, context), {}));
      step.push_back(Seq(100 + s, context, {tokens[context + s % max_k]}, {0}));
    }
    if (!ForwardToHost(model, prefill, &logits).ok()) std::exit(1);
    const double t = MedianSeconds([&] { return ForwardToHost(model, step, &logits); });
    std::printf("%12d %9.3f %10.0f\n", b, t * 1e3, b / t);
    for (int s = 0; s < b; ++s) (void)model.Release(100 + s);
  }

  if (absl::GetFlag(FLAGS_profile)) Profile(*weights, backend, options, context, 4, tokens);

  std::printf("resident memory: %.3f GB = %.2f x weights (%.3f GB) + KV cache %.3f GB%s\n",
              ResidentBytes() * 1e-9, (ResidentBytes() - options.kv_cache_bytes) / weight_bytes,
              weight_bytes * 1e-9, options.kv_cache_bytes * 1e-9,
              keep_host ? " (host copies kept for --profile)" : "");

  // The backend's matmul on this model's up_proj, in its format (fastest calls).
  std::printf("up_proj matmul [rows x %d] x [%d x %d]^T GFLOP/s (peak %.1f):", c.hidden_size,
              c.intermediate_size, c.hidden_size, peak.gflops_all);
  double rows1_gflops = 0;
  for (int rows : {1, 8, 64, 256}) {
    const double gflops = MatMulGflops(backend, rows, up);
    if (rows == 1) rows1_gflops = gflops;
    std::printf("  rows %d: %.2f", rows, gflops);
  }
  // One row reads each weight once per 2 flops.
  const double bytes_per_weight = double(StoredRowBytes(up.dtype, up.cols)) / up.cols +
                                  (IsBlockQuantized(up.dtype) ? 2.0 / kQ8BlockSize : 0.0);
  std::printf("\n  rows 1 streams %.1f GB/s of weights\n", rows1_gflops / 2 * bytes_per_weight);
}

// The weights of a model directory or synthetic spec, their linear matrices converted
// to `format` unless it is empty.
absl::StatusOr<LlamaWeights> LoadOrMake(const std::string& source, bool synthetic,
                                        const std::string& format) {
  absl::StatusOr<LlamaWeights> weights;
  if (synthetic) {
    auto model = ParseSyntheticModel(source);
    if (!model.ok()) return model.status();
    weights = MakeSyntheticWeights(*model, 1);
  } else {
    weights = LoadLlamaWeights(source, 0, 1);
  }
  if (!weights.ok() || format.empty()) return weights;
  auto dtype = ParseWeightFormat(format);
  if (!dtype.ok()) return dtype.status();
  return ConvertLinearWeights(*weights, *dtype);
}

}  // namespace
}  // namespace tandem

using tandem::LoadOrMake;

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const tandem::bench::PeakFlops peak =
      tandem::bench::MeasurePeakFlops(threads, absl::GetFlag(FLAGS_peak_seconds));
  std::printf("float32 FMA peak (%s): %.1f GFLOP/s per core, %.1f GFLOP/s on %d threads", peak.isa,
              peak.gflops_per_core, peak.gflops_all, peak.threads);
  if (peak.gflops_all_512 > 0) std::printf("; 512-bit FMAs: %.1f GFLOP/s", peak.gflops_all_512);
  std::printf("\n");
  const tandem::bench::MemoryBandwidth bandwidth = tandem::bench::MeasureMemoryBandwidth(
      threads, size_t(absl::GetFlag(FLAGS_bandwidth_mb)) << 20, 0.3);
  std::printf("memory bandwidth on %d threads: triad %.1f GB/s, read %.1f GB/s\n", threads,
              bandwidth.triad_gbps, bandwidth.read_gbps);
  std::vector<std::string> formats =
      absl::StrSplit(absl::GetFlag(FLAGS_weight_format), ',', absl::SkipEmpty());
  const std::string synthetic = absl::GetFlag(FLAGS_synthetic);
  if (formats.empty() && !synthetic.empty()) formats = {"bf16"};  // Distinct layer buffers.
  if (formats.empty()) formats = {""};
  const std::vector<std::string> sources = absl::StrSplit(
      synthetic.empty() ? absl::GetFlag(FLAGS_models) : synthetic, ',', absl::SkipEmpty());
  for (const std::string& source : sources) {
    for (const std::string& format : formats) {
      auto weights = LoadOrMake(source, !synthetic.empty(), format);
      if (!weights.ok()) {
        std::fprintf(stderr, "model_bench: %s\n", weights.status().ToString().c_str());
        return 1;
      }
      tandem::BenchModel(source, *std::move(weights), threads, peak, bandwidth);
    }
  }
  return 0;
}
