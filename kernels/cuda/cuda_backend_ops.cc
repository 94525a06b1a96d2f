// CudaBackend ops: argument checks and kernel launches (contract in cuda_backend.h).
//
// Never executed on a GPU in the environment this was written in.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_internal.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/gemm_kernels.h"
#include "kernels/cuda/norm_rope_kernels.h"
#include "kernels/cuda/quantized_gemm_kernels.h"

namespace tandem {

using cuda::internal::AsCudaStep;
using cuda::internal::Bf16Data;
using cuda::internal::CudaPreparedStep;

namespace {

// Selects the backend's device for this thread; a failure aborts (ops have no status).
void Select(int device) {
  const cudaError_t err = cudaSetDevice(device);
  CHECK(err == cudaSuccess) << "cudaSetDevice(" << device << "): " << cudaGetErrorString(err);
}

// The kernels' element type of a KV cache of `dtype` (f32, f16 or bf16; see
// SupportsKvDType); anything else aborts, as the model checks it at load.
cuda::KvElement KvElementOf(DType dtype, const char* op) {
  switch (dtype) {
    case DType::kF32:
      return cuda::KvElement::kF32;
    case DType::kF16:
      return cuda::KvElement::kF16;
    case DType::kBF16:
      return cuda::KvElement::kBF16;
    default:
      LOG(FATAL) << op << ": " << DTypeName(dtype) << " KV caches are not supported";
  }
  return cuda::KvElement::kF32;  // Not reached.
}

}  // namespace

void CudaBackend::Embedding(const PreparedStep& step, const Weight& table, float* out) {
  const CudaPreparedStep& s = AsCudaStep(step);
  const uint16_t* data = Bf16Data(table, "Embedding");
  CHECK(s.layout().max_token < table.rows)
      << "Embedding: token " << s.layout().max_token << " outside the vocabulary of " << table.rows;
  Select(device());
  Record(cuda::LaunchEmbedding(data, static_cast<int>(table.cols),
                               s.Device<int32_t>(s.layout().tokens), s.layout().rows, out,
                               state_->stream),
         "Embedding");
}

void CudaBackend::RmsNorm(const float* x, const Weight& weight, int rows, int dim, float eps,
                          float* out) {
  const uint16_t* w = Bf16Data(weight, "RmsNorm");
  CHECK_GE(weight.rows * weight.cols, dim) << "RmsNorm: weight shorter than dim";
  Select(device());
  Record(cuda::LaunchRmsNorm(x, w, rows, dim, eps, out, state_->stream), "RmsNorm");
}

void CudaBackend::QuantizedMatMul(const float* x, int rows, const Weight& w, float* out) {
  CHECK(w.data != nullptr && w.scales != nullptr)
      << "MatMul: " << DTypeName(w.dtype) << " weight without data (upload it with UploadQ"
      << (w.dtype == DType::kQ4_0 ? 4 : 8) << "Weight)";
  const int out_dim = static_cast<int>(w.rows), in_dim = static_cast<int>(w.cols);
  const size_t blocks = size_t(rows) * size_t(Q8BlocksPerRow(in_dim));
  const size_t quant_bytes = blocks * kQ8BlockSize, scale_offset = (quant_bytes + 15) / 16 * 16;
  absl::Status grown =
      state_->Grow(state_->gemm_quants, scale_offset + blocks * sizeof(float), "GEMM quants");
  if (!grown.ok()) {
    if (state_->first_error.ok()) state_->first_error = grown;
    return;
  }
  auto* base = static_cast<uint8_t*>(state_->gemm_quants.memory.get());
  auto* quants = reinterpret_cast<int8_t*>(base);
  auto* scales = reinterpret_cast<float*>(base + scale_offset);
  Record(cuda::LaunchQuantizeRows(x, rows, in_dim, quants, scales, state_->stream),
         "MatMul (quantize input)");
  Record(cuda::LaunchQuantizedGemm(quants, scales, rows, w.data,
                                   static_cast<const uint16_t*>(w.scales), w.dtype == DType::kQ4_0,
                                   out_dim, in_dim, out, state_->stream),
         "MatMul");
}

void CudaBackend::MatMul(const float* x, int rows, const Weight& w, float* out) {
  if (IsBlockQuantized(w.dtype)) {
    if (rows == 0 || w.rows == 0) return;
    Select(device());
    QuantizedMatMul(x, rows, w, out);
    return;
  }
  const uint16_t* weights = Bf16Data(w, "MatMul");
  if (rows == 0 || w.rows == 0) return;
  Select(device());
  const int out_dim = static_cast<int>(w.rows), in_dim = static_cast<int>(w.cols);
  if (state_->options.gemm == CudaBackendOptions::Gemm::kBatchInvariant) {
    Record(cuda::LaunchBf16Gemm(x, rows, weights, out_dim, in_dim, out, state_->stream), "MatMul");
    return;
  }
  // cuBLAS: round the activations to bf16, then C[out_dim x rows] (column-major) =
  // W^T-as-stored (row-major [out, in] is column-major [in, out]) times X.
  const size_t count = size_t(rows) * size_t(in_dim);
  absl::Status grown = state_->Grow(state_->gemm_input, count * sizeof(uint16_t), "GEMM input");
  if (!grown.ok()) {
    if (state_->first_error.ok()) state_->first_error = grown;
    return;
  }
  auto* input = static_cast<uint16_t*>(state_->gemm_input.memory.get());
  Record(cuda::LaunchF32ToBf16(x, count, input, state_->stream), "MatMul (convert input)");
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasGemmEx(state_->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, rows, in_dim, &alpha, weights,
                   CUDA_R_16BF, in_dim, input, CUDA_R_16BF, in_dim, &beta, out, CUDA_R_32F, out_dim,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS && state_->first_error.ok()) {
    state_->first_error =
        absl::InternalError(absl::StrCat("MatMul: cublasGemmEx failed on CUDA device ", device(),
                                         ": ", cublasGetStatusString(status), " ([", rows, " x ",
                                         in_dim, "] x [", out_dim, " x ", in_dim, "]^T)"));
    LOG(ERROR) << "CudaBackend: " << state_->first_error;
  }
}

void CudaBackend::Rope(const PreparedStep& step, float* x, int num_heads, int head_dim,
                       const float* inv_freq) {
  const CudaPreparedStep& s = AsCudaStep(step);
  CHECK(head_dim > 0 && head_dim % 2 == 0) << "Rope: head_dim must be even";
  Select(device());
  const size_t half = size_t(head_dim) / 2;
  const float* device_freq = nullptr;
  for (const auto& [host, memory] : state_->inv_freqs) {
    if (host.size() == half && std::memcmp(host.data(), inv_freq, half * sizeof(float)) == 0) {
      device_freq = static_cast<const float*>(memory.get());
      break;
    }
  }
  if (device_freq == nullptr) {  // First use of this array: upload it once.
    auto memory = cuda::AllocateDeviceMemory(device(), half * sizeof(float), "RoPE frequencies");
    absl::Status status = memory.status();
    if (status.ok()) {
      status = cuda::CudaStatus(
          cudaMemcpy(memory->get(), inv_freq, half * sizeof(float), cudaMemcpyHostToDevice),
          "cudaMemcpy (RoPE frequencies)", device());
    }
    if (!status.ok()) {
      if (state_->first_error.ok()) state_->first_error = status;
      return;
    }
    device_freq = static_cast<const float*>(memory->get());
    state_->inv_freqs.emplace_back(std::vector<float>(inv_freq, inv_freq + half),
                                   *std::move(memory));
  }
  Record(cuda::LaunchRope(x, s.layout().rows, num_heads, head_dim,
                          s.Device<int32_t>(s.layout().positions), device_freq, state_->stream),
         "Rope");
}

void CudaBackend::WriteKv(const PreparedStep& step, const float* k, const float* v,
                          const KvLayout& layout, void* k_cache, void* v_cache) {
  const cuda::KvElement element = KvElementOf(layout.dtype, "WriteKv");
  const CudaPreparedStep& s = AsCudaStep(step);
  const int64_t slots = int64_t(layout.num_blocks) * layout.block_size;
  CHECK(s.layout().max_slot < slots)
      << "WriteKv: slot " << s.layout().max_slot << " outside the cache of " << slots << " slots";
  Select(device());
  Record(cuda::LaunchWriteKv(k, v, s.Device<int64_t>(s.layout().kv_slots), s.layout().rows,
                             layout.num_kv_heads * layout.head_dim, element, k_cache, v_cache,
                             state_->stream),
         "WriteKv");
}

void CudaBackend::Attention(const PreparedStep& step, const float* q, const KvLayout& layout,
                            const void* k_cache, const void* v_cache, int num_heads, float scale,
                            float* out) {
  const cuda::KvElement element = KvElementOf(layout.dtype, "Attention");
  const CudaPreparedStep& s = AsCudaStep(step);
  const cuda::StepLayout& l = s.layout();
  CHECK(layout.num_kv_heads > 0 && num_heads % layout.num_kv_heads == 0)
      << "Attention: " << num_heads << " heads over " << layout.num_kv_heads << " KV heads";
  CHECK(layout.head_dim > 0 && layout.head_dim <= cuda::kAttentionMaxHeadDim)
      << "Attention: head_dim " << layout.head_dim << " outside [1, " << cuda::kAttentionMaxHeadDim
      << "]";
  CHECK(l.max_block_id < layout.num_blocks)
      << "Attention: block " << l.max_block_id << " outside the cache of " << layout.num_blocks
      << " blocks";
  if (l.rows == 0) return;
  Select(device());
  const int64_t acc = cuda::AttentionScratchAccFloats(l.total_chunks, num_heads, layout.head_dim);
  const int64_t max_sum = cuda::AttentionScratchMaxSumFloats(l.total_chunks, num_heads);
  absl::Status grown = state_->Grow(state_->attention_scratch,
                                    size_t(acc + max_sum) * sizeof(float), "attention scratch");
  if (!grown.ok()) {
    if (state_->first_error.ok()) state_->first_error = grown;
    return;
  }
  cuda::AttentionParams p;
  p.q = q;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.kv_element = element;
  p.out = out;
  p.rows = l.rows;
  p.num_heads = num_heads;
  p.num_kv_heads = layout.num_kv_heads;
  p.head_dim = layout.head_dim;
  p.scale = scale;
  p.block_size = s.plan().block_size;
  p.block_tables = s.Device<int32_t>(l.block_tables);
  p.row_table_offset = s.Device<int32_t>(l.row_table_offset);
  p.row_prefix = s.Device<int32_t>(l.row_prefix);
  p.row_extra_begin = s.Device<int32_t>(l.row_extra_begin);
  p.extra_keys = s.Device<int32_t>(l.extra_keys);
  p.row_chunk_begin = s.Device<int32_t>(l.row_chunk_begin);
  p.chunk_row = s.Device<int32_t>(l.chunk_row);
  p.total_chunks = l.total_chunks;
  p.partial_acc = static_cast<float*>(state_->attention_scratch.memory.get());
  p.partial_max_sum = p.partial_acc + acc;
  Record(cuda::LaunchPagedAttention(p, state_->stream), "Attention");
}

void CudaBackend::SiluMul(const float* gate, const float* up, size_t n, float* out) {
  Select(device());
  Record(cuda::LaunchSiluMul(gate, up, n, out, state_->stream), "SiluMul");
}

void CudaBackend::Add(float* x, const float* y, size_t n) {
  Select(device());
  Record(cuda::LaunchAdd(x, y, n, state_->stream), "Add");
}

void CudaBackend::GatherRows(const float* x, int dim, const std::vector<int32_t>& rows,
                             float* out) {
  Select(device());
  const size_t row_bytes = size_t(dim) * sizeof(float);
  for (size_t j = 0; j < rows.size();) {
    CHECK_GE(rows[j], 0) << "GatherRows: negative row index";
    size_t run = 1;  // Consecutive source rows become one copy.
    while (j + run < rows.size() && rows[j + run] == rows[j] + int32_t(run)) ++run;
    Record(cudaMemcpyAsync(out + j * size_t(dim), x + size_t(rows[j]) * dim, run * row_bytes,
                           cudaMemcpyDeviceToDevice, state_->stream),
           "GatherRows");
    j += run;
  }
}

absl::Status CudaBackend::MemoryInfo(size_t* free_bytes, size_t* total_bytes) {
  if (absl::Status s = cuda::SelectDevice(device()); !s.ok()) return s;
  return cuda::CudaStatus(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo", device());
}

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& options) {
  auto backend = CudaBackend::Create(options);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<Backend>(*std::move(backend));
}

}  // namespace tandem
