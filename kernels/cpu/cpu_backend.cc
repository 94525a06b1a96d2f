#include "kernels/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantized_tiles.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21  // Linux 5.4; older kernels answer EINVAL (the advice is dropped).
#endif

namespace tandem {
namespace {

constexpr size_t kAlignment = 64;

int ResolveThreads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// A StepPlan copy plus what the kernels derive from it once per step.
class CpuPreparedStep : public PreparedStep {
 public:
  explicit CpuPreparedStep(const StepPlan& plan)
      : plan_(plan), attention_(cpu::BuildAttentionRows(plan_)) {}
  const StepPlan& plan() const override { return plan_; }
  const cpu::AttentionRows& attention() const { return attention_; }

  // The cos/sin table for `inv_freq` (built on first use, reused by every layer).
  const cpu::RopeTable& Rope(const float* inv_freq, int half) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& table : rope_tables_) {
      if (table->half == half &&
          std::memcmp(table->inv_freq.data(), inv_freq, sizeof(float) * size_t(half)) == 0) {
        return *table;
      }
    }
    rope_tables_.push_back(std::make_unique<cpu::RopeTable>(
        cpu::BuildRopeTable(plan_.positions.data(), plan_.num_rows(), inv_freq, half)));
    return *rope_tables_.back();
  }

 private:
  const StepPlan plan_;
  const cpu::AttentionRows attention_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<cpu::RopeTable>> rope_tables_;
};

const CpuPreparedStep& AsCpuStep(const PreparedStep& step) {
  const auto* cpu_step = dynamic_cast<const CpuPreparedStep*>(&step);
  CHECK(cpu_step != nullptr) << "PreparedStep was not made by CpuBackend::Prepare";
  return *cpu_step;
}

const float* F32Data(const Weight& w, const char* op) {
  CHECK(w.dtype == DType::kF32) << op << ": weight is not float32 (upload it with "
                                << "CpuBackend::UploadWeight)";
  return static_cast<const float*>(w.data);
}

// The kernels' view of an uploaded weight.
cpu::WeightMatrix Matrix(const Weight& w) {
  CHECK(w.data != nullptr || w.rows * w.cols == 0) << "weight has no data";
  return cpu::WeightMatrix{w.dtype, w.data, static_cast<int>(w.rows), static_cast<int>(w.cols)};
}

absl::Status CheckCopy(const void* src, const void* dst, size_t bytes, const char* op) {
  if (bytes > 0 && (src == nullptr || dst == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": null pointer for ", bytes, " bytes"));
  }
  return absl::OkStatus();
}

// Advises the kernel that the whole pages inside [data, data + bytes) will not be read
// again (MADV_PAGEOUT): pages of a file mapping leave the resident set (they would be
// read back from the file if touched); other memory keeps its contents. Best effort.
void AdviseNotNeeded(const void* data, size_t bytes) {
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
}

// Physical memory of this machine in bytes (0 if unknown).
size_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? size_t(pages) * size_t(page_size) : 0;
}

}  // namespace

CpuBackend::CpuBackend(int threads) : CpuBackend(threads, cpu::DetectSimdLevel()) {}

CpuBackend::CpuBackend(int threads, cpu::SimdLevel level)
    : level_(cpu::SupportedSimdLevel(level)), pool_(ResolveThreads(threads)) {}

absl::StatusOr<Buffer> CpuBackend::Allocate(size_t bytes) {
  static const size_t physical = PhysicalMemoryBytes();
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes || (physical > 0 && bytes > physical)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", bytes, " bytes: the machine has ", physical, " bytes of memory"));
  }
  void* data = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
  }
  std::memset(data, 0, rounded);
  return Buffer(data, bytes, std::shared_ptr<void>(data, [](void* p) { std::free(p); }));
}

absl::StatusOr<Buffer> CpuBackend::AllocateWeightPages(size_t bytes) {
  constexpr size_t kHugePage = size_t(2) << 20;
  void* data = nullptr;
  if (posix_memalign(&data, kHugePage, bytes == 0 ? kHugePage : bytes) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of host memory for a weight"));
  }
  if (bytes >= kHugePage) (void)madvise(data, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return Buffer(data, bytes, std::shared_ptr<void>(data, [](void* p) { std::free(p); }));
}

absl::Status CpuBackend::CopyToDevice(const void* host, void* device, size_t bytes) {
  if (auto status = CheckCopy(host, device, bytes, "CopyToDevice"); !status.ok()) return status;
  if (bytes > 0) std::memcpy(device, host, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyToHost(const void* device, void* host, size_t bytes) {
  if (auto status = CheckCopy(device, host, bytes, "CopyToHost"); !status.ok()) return status;
  if (bytes > 0) std::memcpy(host, device, bytes);
  return absl::OkStatus();
}

absl::Status CpuBackend::CopyOnDevice(const void* src, void* dst, size_t bytes) {
  if (auto status = CheckCopy(src, dst, bytes, "CopyOnDevice"); !status.ok()) return status;
  if (bytes > 0) std::memmove(dst, src, bytes);
  return absl::OkStatus();
}

absl::StatusOr<Weight> CpuBackend::UploadWeight(const void* data, DType dtype, int64_t rows,
                                                int64_t cols, std::shared_ptr<const void> owner) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("UploadWeight: negative shape [", rows, ", ", cols, "]"));
  }
  if (cols > 0 && rows > std::numeric_limits<int32_t>::max() / cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("UploadWeight: [", rows, ", ", cols, "] has too many elements"));
  }
  const int64_t count = rows * cols;
  if (count > 0 && data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("UploadWeight: null data for a [", rows, ", ", cols, "] weight"));
  }
  if (IsBlockQuantized(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "UploadWeight: ", DTypeName(dtype), " weights go through UploadQ8Weight/UploadQ4Weight"));
  }
  Weight weight;
  weight.dtype = dtype;
  weight.rows = rows;
  weight.cols = cols;
  if (dtype == DType::kF32 || rows > 1) {  // Matrices stay as stored: zero copy.
    weight.data = data;
    weight.owner = std::move(owner);
    return weight;
  }
  // A 16-bit vector (norm weight): widened once, so RmsNorm reads float32.
  absl::StatusOr<Buffer> buffer = Allocate(size_t(count) * sizeof(float));
  if (!buffer.ok()) return buffer.status();
  cpu::WidenRow(cpu::WeightMatrix{dtype, data, 1, static_cast<int>(count)}, 0, buffer->f32());
  weight.dtype = DType::kF32;
  weight.data = buffer->f32();
  auto holder = std::make_shared<Buffer>(std::move(*buffer));
  weight.owner = std::shared_ptr<const void>(holder, holder->data());
  return weight;
}

absl::StatusOr<Weight> CpuBackend::UploadQ8Weight(const void* quants, const void* scales,
                                                  int64_t rows, int64_t cols,
                                                  std::shared_ptr<const void> owner) {
  return UploadBlockQuantized(DType::kQ8_0, quants, scales, rows, cols, std::move(owner));
}

absl::StatusOr<Weight> CpuBackend::UploadQ4Weight(const void* packed, const void* scales,
                                                  int64_t rows, int64_t cols,
                                                  std::shared_ptr<const void> owner) {
  return UploadBlockQuantized(DType::kQ4_0, packed, scales, rows, cols, std::move(owner));
}

absl::StatusOr<Weight> CpuBackend::UploadBlockQuantized(DType dtype, const void* quants,
                                                        const void* scales, int64_t rows,
                                                        int64_t cols,
                                                        std::shared_ptr<const void> owner) {
  if (absl::Status s = ValidateBlockQuantizedUpload(dtype, quants, scales, rows, cols); !s.ok()) {
    return s;
  }
  absl::StatusOr<Buffer> buffer = AllocateWeightPages(cpu::QuantizedTilesBytes(dtype, rows, cols));
  if (!buffer.ok()) return buffer.status();
  if (rows * cols > 0) {
    cpu::PackQuantizedTiles(dtype, quants, static_cast<const uint16_t*>(scales),
                            static_cast<int>(rows), static_cast<int>(cols),
                            static_cast<uint8_t*>(buffer->data()));
    const int64_t quant_bytes = rows * StoredRowBytes(dtype, cols);
    AdviseNotNeeded(quants, size_t(quant_bytes));
    AdviseNotNeeded(scales, size_t(rows * Q8BlocksPerRow(cols)) * sizeof(uint16_t));
  }
  Weight weight;
  weight.data = buffer->data();
  weight.dtype = dtype;
  weight.rows = rows;
  weight.cols = cols;
  auto holder = std::make_shared<Buffer>(std::move(*buffer));
  weight.owner = std::shared_ptr<const void>(holder, holder->data());
  return weight;
}

absl::StatusOr<std::unique_ptr<PreparedStep>> CpuBackend::Prepare(const StepPlan& plan) {
  if (absl::Status status = ValidateStepPlan(plan); !status.ok()) return status;
  return std::unique_ptr<PreparedStep>(new CpuPreparedStep(plan));
}

void CpuBackend::Embedding(const PreparedStep& step, const Weight& table, float* out) {
  const StepPlan& plan = AsCpuStep(step).plan();
  const cpu::WeightMatrix matrix = Matrix(table);
  const size_t dim = size_t(table.cols);
  for (int r = 0; r < plan.num_rows(); ++r) {
    const int32_t token = plan.tokens[r];
    CHECK(token >= 0 && token < table.rows)
        << "Embedding: token " << token << " outside the vocabulary of " << table.rows;
    cpu::WidenRow(matrix, token, out + r * dim);
  }
}

void CpuBackend::RmsNorm(const float* x, const Weight& weight, int rows, int dim, float eps,
                         float* out) {
  CHECK_GE(weight.rows * weight.cols, dim) << "RmsNorm: weight shorter than dim";
  cpu::RmsNorm(level_, &pool_, x, F32Data(weight, "RmsNorm"), rows, dim, eps, out);
}

void CpuBackend::MatMul(const float* x, int rows, const Weight& w, float* out) {
  cpu::MatMul(level_, &pool_, x, rows, Matrix(w), out);
}

void CpuBackend::Rope(const PreparedStep& step, float* x, int num_heads, int head_dim,
                      const float* inv_freq) {
  CHECK_EQ(head_dim % 2, 0) << "Rope: head_dim must be even";
  const cpu::RopeTable& table = AsCpuStep(step).Rope(inv_freq, head_dim / 2);
  cpu::ApplyRope(table, x, num_heads, head_dim);
}

void CpuBackend::WriteKv(const PreparedStep& step, const float* k, const float* v,
                         const KvLayout& layout, void* k_cache, void* v_cache) {
  CHECK(SupportsKvDType(layout.dtype)) << "WriteKv: unsupported KV dtype";
  const StepPlan& plan = AsCpuStep(step).plan();
  const size_t width = size_t(layout.num_kv_heads) * layout.head_dim;
  const size_t value_size = DTypeSize(layout.dtype);
  const int64_t slots = int64_t(layout.num_blocks) * layout.block_size;
  // One row of float32 values into the cache's dtype (round to nearest even).
  auto store = [&](const float* src, void* cache, int64_t slot) {
    uint8_t* dst = static_cast<uint8_t*>(cache) + size_t(slot) * width * value_size;
    if (layout.dtype == DType::kF32) {
      std::memcpy(dst, src, width * sizeof(float));
      return;
    }
    auto* half = reinterpret_cast<uint16_t*>(dst);
    for (size_t i = 0; i < width; ++i) {
      half[i] = layout.dtype == DType::kF16 ? cpu::FloatToF16(src[i]) : cpu::FloatToBf16(src[i]);
    }
  };
  for (int r = 0; r < plan.num_rows(); ++r) {
    const int64_t slot = plan.kv_slots[r];
    CHECK(slot >= 0 && slot < slots)
        << "WriteKv: slot " << slot << " outside the cache of " << slots << " slots";
    store(k + r * width, k_cache, slot);
    store(v + r * width, v_cache, slot);
  }
}

void CpuBackend::Attention(const PreparedStep& step, const float* q, const KvLayout& layout,
                           const void* k_cache, const void* v_cache, int num_heads, float scale,
                           float* out) {
  const CpuPreparedStep& cpu_step = AsCpuStep(step);
  cpu::PagedAttention(level_, &pool_, cpu_step.plan(), cpu_step.attention(), q, layout, k_cache,
                      v_cache, num_heads, scale, out);
}

void CpuBackend::SiluMul(const float* gate, const float* up, size_t n, float* out) {
  cpu::SiluMul(level_, &pool_, gate, up, n, out);
}

void CpuBackend::Add(float* x, const float* y, size_t n) { cpu::Add(&pool_, x, y, n); }

void CpuBackend::GatherRows(const float* x, int dim, const std::vector<int32_t>& rows, float* out) {
  for (size_t j = 0; j < rows.size(); ++j) {
    CHECK_GE(rows[j], 0) << "GatherRows: negative row index";
    std::memmove(out + j * size_t(dim), x + size_t(rows[j]) * dim, sizeof(float) * size_t(dim));
  }
}

std::string CpuBackend::Description() const {
  return absl::StrCat(
      "cpu: ", cpu::SimdLevelName(level_), " kernels, ", pool_.num_threads(),
      " threads; matmul weights f32, bf16 and f16 read as stored, q8_0 and q4_0 in 16-column "
      "tiles (int8 dot products",
      level_ == cpu::SimdLevel::kAvx512Vnni ? ", vpdpbusd; the other kernels avx2)" : ")");
}

std::unique_ptr<Backend> MakeCpuBackend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace tandem
