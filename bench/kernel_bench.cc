// CPU kernel benchmark: matmul GFLOP/s on the shapes of a hidden-256 Llama model and
// paged-attention time per query, each against the machine's FMA peak measured in the
// same run (the ratio is the figure to compare across noisy, shared machines); and
// (--only=stream) decode-shaped matmuls streaming every weight format from main memory,
// against the memory bandwidth measured in the same run.
//
//   bazel run //bench:kernel_bench -- --threads=2 --seconds=0.2
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "bench/memory_bandwidth.h"
#include "bench/peak_flops.h"
#include "kernels/backend.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantized_tiles.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

ABSL_FLAG(int, threads, 0, "Threads for the multi-threaded columns (0 = hardware threads).");
ABSL_FLAG(double, seconds, 0.1, "Approximate measuring time per figure.");
ABSL_FLAG(std::string, simd, "",
          "Force a SIMD level: avx512vnni, avx2 or portable (default: detected; a level\n"
          "the CPU lacks falls back to the highest one it has).");
ABSL_FLAG(std::string, only, "",
          "Run one section only: matmul, attention or stream (default: all three).");
ABSL_FLAG(std::string, matmul_shapes, "256x256,256x688,688x256,256x2048,256x4096",
          "Matmul section: comma-separated in_dim x out_dim shapes (the 1B model's: "
          "2048x2048,2048x256,2048x5632,5632x2048).");
ABSL_FLAG(std::string, matmul_rows, "1,2,4,5,8,16,32,64",
          "Matmul section: comma-separated row counts (at most 256).");
ABSL_FLAG(std::string, matmul_format, "f32", "Matmul section: weight format f32, bf16 or f16.");
ABSL_FLAG(int64_t, stream_mb, 512,
          "Weight bytes per format in the stream section, in MB (far above the caches).");
ABSL_FLAG(int, stream_rows, 5,
          "Rows of the stream section's multi-row figure (5: verifying K = 4; at most 64).");

namespace tandem {
namespace bench {
namespace {

// Seconds per call of `fn`: the best of many ~2 ms samples over about `seconds` (the
// machine is shared; the best sample is the least disturbed one).
double TimePerCall(const std::function<void()>& fn, double seconds) {
  using Clock = std::chrono::steady_clock;
  fn();  // Warm up caches and threads.
  int calls = 1;
  while (true) {
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed > 0.5e-3) {
      calls = std::max(1, static_cast<int>(calls * 2e-3 / elapsed));
      break;
    }
    calls *= 2;
  }
  double best = 1e30;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (int sample = 0; sample < 3 || Clock::now() < end; ++sample) {
    const auto start = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, elapsed / calls);
  }
  return best;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The matmul section's shapes and row counts from the flags; exits on a malformed list.
struct MatMulShape {
  int in_dim = 0, out_dim = 0;
};

std::vector<MatMulShape> MatMulShapes() {
  std::vector<MatMulShape> shapes;
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_matmul_shapes), ',')) {
    const std::vector<std::string> dims = absl::StrSplit(item, 'x');
    MatMulShape shape;
    if (dims.size() != 2 || !absl::SimpleAtoi(dims[0], &shape.in_dim) ||
        !absl::SimpleAtoi(dims[1], &shape.out_dim) || shape.in_dim <= 0 || shape.out_dim <= 0) {
      std::fprintf(stderr, "kernel_bench: bad --matmul_shapes entry '%s'\n",
                   std::string(item).c_str());
      std::exit(2);
    }
    shapes.push_back(shape);
  }
  return shapes;
}

std::vector<int> MatMulRows() {
  std::vector<int> rows;
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_matmul_rows), ',')) {
    int r = 0;
    if (!absl::SimpleAtoi(item, &r) || r < 1 || r > 256) {
      std::fprintf(stderr, "kernel_bench: bad --matmul_rows entry '%s'\n",
                   std::string(item).c_str());
      std::exit(2);
    }
    rows.push_back(r);
  }
  return rows;
}

// The weight `w` in `format` (f32, bf16 or f16; the 16-bit copies are stored in `bits`).
cpu::WeightMatrix MatMulWeight(const std::string& format, const std::vector<float>& w,
                               const MatMulShape& s, std::vector<uint16_t>* bits) {
  if (format == "f32") return {DType::kF32, w.data(), s.out_dim, s.in_dim};
  const bool bf16 = format == "bf16";
  if (!bf16 && format != "f16") {
    std::fprintf(stderr, "kernel_bench: --matmul_format must be f32, bf16 or f16\n");
    std::exit(2);
  }
  bits->resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    (*bits)[i] = bf16 ? cpu::FloatToBf16(w[i]) : cpu::FloatToF16(w[i]);
  }
  return {bf16 ? DType::kBF16 : DType::kF16, bits->data(), s.out_dim, s.in_dim};
}

void BenchMatMul(cpu::SimdLevel level, const PeakFlops& peak, double seconds) {
  const std::string format = absl::GetFlag(FLAGS_matmul_format);
  const std::vector<int> row_counts = MatMulRows();
  const int max_rows = *std::max_element(row_counts.begin(), row_counts.end());
  cpu::ThreadPool one(1), all(peak.threads);
  std::printf("\nmatmul out[rows, out] = x[rows, in] . W[out, in]^T  (%s, %s weights)\n",
              cpu::SimdLevelName(level), format.c_str());
  std::printf("%-12s %5s | %9s %7s | %9s %7s | %9s\n", "in->out", "rows", "1T GF/s", "%peak1",
              "NT GF/s", "%peakN", "NT us");
  for (const MatMulShape& s : MatMulShapes()) {
    const auto w = Random(size_t(s.out_dim) * s.in_dim, 1);
    std::vector<uint16_t> bits;
    const cpu::WeightMatrix weight = MatMulWeight(format, w, s, &bits);
    const auto x = Random(size_t(max_rows) * s.in_dim, 2);
    std::vector<float> out(size_t(max_rows) * s.out_dim);
    for (int rows : row_counts) {
      const double flops = 2.0 * rows * s.in_dim * s.out_dim;
      auto run = [&](cpu::ThreadPool* pool) {
        return TimePerCall([&] { cpu::MatMul(level, pool, x.data(), rows, weight, out.data()); },
                           seconds);
      };
      const double t1 = run(&one), tn = run(&all);
      const double g1 = flops / t1 * 1e-9, gn = flops / tn * 1e-9;
      std::printf("%4d->%-6d %5d | %9.1f %6.1f%% | %9.1f %6.1f%% | %9.2f\n", s.in_dim, s.out_dim,
                  rows, g1, 100 * g1 / peak.gflops_per_core, gn, 100 * gn / peak.gflops_all,
                  tn * 1e6);
    }
  }
}

// One sequence of `rows` new rows (a chain) after `context` cached keys.
StepPlan AttentionPlan(int context, int rows, int block_size) {
  StepPlan plan;
  plan.block_size = block_size;
  StepPlan::Sequence seq;
  seq.row_count = rows;
  seq.context_length = context;
  const int blocks = (context + rows + block_size - 1) / block_size;
  for (int b = 0; b < blocks; ++b) seq.block_table.push_back(blocks - 1 - b);  // Scattered.
  for (int i = 0; i < rows; ++i) {
    const int logical = context + i;
    plan.tokens.push_back(0);
    plan.positions.push_back(logical);
    plan.kv_slots.push_back(int64_t(seq.block_table[logical / block_size]) * block_size +
                            logical % block_size);
  }
  plan.sequences.push_back(seq);
  return plan;
}

void BenchAttention(cpu::SimdLevel level, const PeakFlops& peak, double seconds) {
  const int num_heads = 8, num_kv_heads = 2, head_dim = 32, block_size = 16;
  cpu::ThreadPool one(1), all(peak.threads);
  std::printf("\npaged attention, %d heads / %d KV heads x %d, block %d (%s)\n", num_heads,
              num_kv_heads, head_dim, block_size, cpu::SimdLevelName(level));
  std::printf("%8s %5s | %11s %7s | %11s %7s\n", "context", "rows", "1T us/query", "%peak1",
              "NT us/query", "%peakN");
  for (int context : {64, 128, 256, 512, 1024}) {
    for (int rows : {1, 16}) {
      const StepPlan plan = AttentionPlan(context, rows, block_size);
      const cpu::AttentionRows attention_rows = cpu::BuildAttentionRows(plan);
      KvLayout layout;
      layout.block_size = block_size;
      layout.num_kv_heads = num_kv_heads;
      layout.head_dim = head_dim;
      layout.num_blocks = static_cast<int>(plan.sequences[0].block_table.size());
      const size_t cache = layout.BytesPerTensor() / sizeof(float);
      const auto k = Random(cache, 3), v = Random(cache, 4);
      const auto q = Random(size_t(rows) * num_heads * head_dim, 5);
      std::vector<float> out(q.size());
      auto run = [&](cpu::ThreadPool* pool) {
        return TimePerCall(
                   [&] {
                     cpu::PagedAttention(level, pool, plan, attention_rows, q.data(), layout,
                                         k.data(), v.data(), num_heads, 0.17f, out.data());
                   },
                   seconds) /
               rows;
      };
      const double t1 = run(&one), tn = run(&all);
      // q.k and p.v: 2 multiply-adds per key, head and element.
      const double flops = 4.0 * double(attention_rows.total_keys) / rows * num_heads * head_dim;
      std::printf("%8d %5d | %11.2f %6.1f%% | %11.2f %6.1f%%\n", context, rows, t1 * 1e6,
                  100 * flops / t1 * 1e-9 / peak.gflops_per_core, tn * 1e6,
                  100 * flops / tn * 1e-9 / peak.gflops_all);
    }
  }
}

// `count` random [out_dim x in_dim] weights of one format, owning their bytes: small
// 16-bit floats (exponent 0x3x) as 16-bit elements or block scales, any bytes as quants.
struct RandomWeights {
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::vector<uint16_t>> scales;
  std::vector<Buffer> tiles;  // q8_0/q4_0: the CPU backend's layout, in its memory.
  std::vector<cpu::WeightMatrix> matrices;
  size_t matrix_bytes = 0;  // Stored bytes of one matrix, scales included.
};

// The stored bytes of a [out_dim x in_dim] weight's elements (quants) in `format`.
size_t DataBytes(DType format, int out_dim, int in_dim) {
  if (format == DType::kQ4_0) return size_t(out_dim) * Q4BytesPerRow(in_dim);
  if (format == DType::kQ8_0) return size_t(out_dim) * in_dim;
  return size_t(out_dim) * in_dim * DTypeSize(format);
}

RandomWeights MakeRandomWeights(DType format, int out_dim, int in_dim, size_t total_bytes) {
  const bool blocked = format == DType::kQ8_0 || format == DType::kQ4_0;
  const size_t data_bytes = DataBytes(format, out_dim, in_dim);
  const size_t scale_count = blocked ? size_t(out_dim) * Q8BlocksPerRow(in_dim) : 0;
  RandomWeights w;
  w.matrix_bytes = data_bytes + 2 * scale_count;
  const size_t count = std::max<size_t>(2, total_bytes / w.matrix_bytes);
  std::mt19937 rng(7);
  w.data.assign(count, std::vector<uint8_t>(data_bytes));
  w.scales.assign(count, std::vector<uint16_t>(scale_count));
  for (size_t i = 0; i < count; ++i) {
    uint8_t* bytes = w.data[i].data();
    if (format == DType::kF32) {
      float* f = reinterpret_cast<float*>(bytes);
      for (size_t k = 0; k < data_bytes / 4; ++k) f[k] = float(rng() % 2001) * 1e-3f - 1.0f;
    } else if (!blocked) {
      uint16_t* halves = reinterpret_cast<uint16_t*>(bytes);
      for (size_t k = 0; k < data_bytes / 2; ++k) halves[k] = 0x3000 | (rng() & 0x8fff);
    } else {
      for (size_t k = 0; k < data_bytes; ++k) bytes[k] = static_cast<uint8_t>(rng());
    }
    for (uint16_t& h : w.scales[i]) h = 0x2000 | (rng() & 0x0fff);
    if (blocked) {  // Tiled as CpuBackend::UploadQ8Weight does, in the memory it uses.
      absl::StatusOr<Buffer> tiles =
          CpuBackend::AllocateWeightPages(cpu::QuantizedTilesBytes(format, out_dim, in_dim));
      if (!tiles.ok()) {
        std::fprintf(stderr, "kernel_bench: %s\n", tiles.status().ToString().c_str());
        std::exit(1);
      }
      bytes = static_cast<uint8_t*>(tiles->data());
      cpu::PackQuantizedTiles(format, w.data[i].data(), w.scales[i].data(), out_dim, in_dim, bytes);
      w.data[i] = {};
      w.scales[i] = {};
      w.tiles.push_back(*std::move(tiles));
    }
    w.matrices.push_back({format, bytes, out_dim, in_dim});
  }
  return w;
}

// Decode-shaped matmuls streaming from main memory: for each weight format, as many
// [5632 x 2048] matrices (the 1B shape's up_proj) as fill --stream_mb, multiplied by 1 and
// by --stream_rows R rows one after another on all threads; prints the weight bytes
// streamed per second against the triad and read bandwidth measured in the same run, and
// T(R rows) / T(1 row).
void BenchStream(cpu::SimdLevel level, int threads, double seconds) {
  constexpr int kOut = 5632, kIn = 2048;
  const size_t total_bytes = size_t(absl::GetFlag(FLAGS_stream_mb)) << 20;
  const MemoryBandwidth bw = MeasureMemoryBandwidth(threads, size_t(256) << 20, 0.5);
  std::printf(
      "\nstreamed matmul [rows x %d] x [%d x %d]^T over %zu MB of weights per format (%s, %d "
      "threads; triad %.1f GB/s, read %.1f GB/s)\n",
      kIn, kOut, kIn, total_bytes >> 20, cpu::SimdLevelName(level), threads, bw.triad_gbps,
      bw.read_gbps);
  const int rows = std::clamp(absl::GetFlag(FLAGS_stream_rows), 1, 64);
  const std::string multi = absl::StrCat(rows, " rows GB/s"),
                    ratio = absl::StrCat("T", rows, "/T1");
  std::printf("%-6s %10s %8s %7s %11s %7s\n", "format", "1 row GB/s", "% triad", "% read",
              multi.c_str(), ratio.c_str());
  cpu::ThreadPool pool(threads);
  const auto x = Random(size_t(rows) * kIn, 2);
  std::vector<float> out(size_t(rows) * kOut);
  for (DType format : {DType::kF32, DType::kBF16, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    const RandomWeights w = MakeRandomWeights(format, kOut, kIn, total_bytes);
    auto time_rows = [&](int n) {
      return TimePerCall(
          [&] {
            for (const cpu::WeightMatrix& m : w.matrices) {
              cpu::MatMul(level, &pool, x.data(), n, m, out.data());
            }
          },
          seconds);
    };
    const double t1 = time_rows(1), t5 = time_rows(rows);
    const double gbps = double(w.matrix_bytes) * w.matrices.size() / t1 * 1e-9;
    std::printf("%-6s %10.1f %7.0f%% %6.0f%% %11.1f %7.2f\n", DTypeName(format), gbps,
                100 * gbps / bw.triad_gbps, 100 * gbps / bw.read_gbps, gbps * t1 / t5, t5 / t1);
  }
}

int Main() {
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  cpu::SimdLevel level = cpu::DetectSimdLevel();
  if (absl::GetFlag(FLAGS_simd) == "portable") level = cpu::SimdLevel::kPortable;
  if (absl::GetFlag(FLAGS_simd) == "avx2") level = cpu::SupportedSimdLevel(cpu::SimdLevel::kAvx2);
  if (absl::GetFlag(FLAGS_simd) == "avx512vnni") {
    level = cpu::SupportedSimdLevel(cpu::SimdLevel::kAvx512Vnni);
  }
  const double seconds = absl::GetFlag(FLAGS_seconds);

  const PeakFlops peak = MeasurePeakFlops(threads, std::max(0.2, seconds));
  std::printf(
      "peak (%s): %.2f vector-FMA/ns per core (GHz-equivalent) x %d lanes x 2 = "
      "%.1f GFLOP/s per core; %d threads together: %.1f GFLOP/s\n",
      peak.isa, peak.fma_ghz_per_core, peak.simd_width, peak.gflops_per_core, peak.threads,
      peak.gflops_all);
  if (peak.gflops_all_512 > 0) {
    std::printf(
        "512-bit FMAs, %d threads together: %.1f GFLOP/s (the float matmul issues 512-bit "
        "FMAs for more than 8 rows at the avx512vnni level, 256-bit ones otherwise)\n",
        peak.threads, peak.gflops_all_512);
  }
  const std::string only = absl::GetFlag(FLAGS_only);
  if (only.empty() || only == "matmul") BenchMatMul(level, peak, seconds);
  if (only.empty() || only == "attention") BenchAttention(level, peak, seconds);
  if (only.empty() || only == "stream") BenchStream(level, threads, seconds);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::bench::Main();
}
