// The NCCL backend: host code only (compiled by nvcc for its CUDA include setup).
// Built only with CUDA; see nccl_communicator_stub.cc otherwise.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/nccl_communicator.h"
#include "comm/op_checks.h"
#include "comm/rank_order_sum_cuda.h"

namespace tandem {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";

absl::Status CudaError(absl::string_view what, cudaError_t err) {
  return absl::InternalError(
      absl::StrCat(what, ": CUDA error ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

absl::Status NcclError(absl::string_view what, ncclResult_t result) {
  std::string message = absl::StrCat(what, ": NCCL error ", static_cast<int>(result), ": ",
                                     ncclGetErrorString(result));
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

// Polls until the communicator has no operation in progress (non-blocking mode) or
// the deadline passes.
absl::Status WaitForComm(ncclComm_t comm, absl::Time deadline, absl::string_view what) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t query = ncclCommGetAsyncError(comm, &state);
    if (query != ncclSuccess) return NcclError(what, query);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(what, state);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": still in progress at the deadline"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int rank, int size, int device, ncclComm_t comm, cudaStream_t stream)
      : rank_(rank), size_(size), device_(device), comm_(comm), stream_(stream) {}

  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) {
      // Finalize flushes outstanding work (bounded, since the communicator is
      // non-blocking); abort if that fails or the communicator is broken.
      bool finalized = false;
      if (broken_.ok()) {
        cudaStreamSynchronize(stream_);
        ncclResult_t r = ncclCommFinalize(comm_);
        finalized = (r == ncclSuccess || r == ncclInProgress) &&
                    WaitForComm(comm_, absl::Now() + absl::Seconds(10), "finalize").ok();
      }
      if (finalized) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (staging_ != nullptr) cudaFree(staging_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override {
    const std::string op = Name("AllReduceSum");
    if (absl::Status s = CheckFloatCount(count, op); !s.ok()) return s;
    if (absl::Status s = Check(data, count * sizeof(float), timeout, op); !s.ok()) return s;
    if (!broken_.ok() || count == 0) return broken_;
    const size_t total_bytes = count * sizeof(float) * static_cast<size_t>(size_);
    if (absl::Status s = EnsureScratch(total_bytes, op); !s.ok()) return Break(s);
    float* gathered = static_cast<float*>(scratch_);
    return Run(
        op, timeout,
        [&]() -> absl::Status {
          ncclResult_t r = ncclAllGather(data, gathered, count, ncclFloat, comm_, stream_);
          if (r != ncclSuccess && r != ncclInProgress) return NcclError(op, r);
          return absl::OkStatus();
        },
        [&]() -> absl::Status {
          // Launched once NCCL has enqueued the gather, so it runs after it on the stream.
          cudaError_t err = cuda::LaunchSumInRankOrder(gathered, size_, count, data, stream_);
          if (err != cudaSuccess) return CudaError(op, err);
          return absl::OkStatus();
        });
  }

  absl::Status AllGather(const void* in, void* out, size_t bytes, absl::Duration timeout) override {
    const std::string op = Name("AllGather");
    if (absl::Status s = Check(in, bytes, timeout, op); !s.ok()) return s;
    if (absl::Status s = CheckBuffer(out, bytes * size_, op); !s.ok()) return s;
    if (!broken_.ok() || bytes == 0) return broken_;
    // Host buffers are staged through device memory: [input | gathered output].
    const bool on_host = !IsDevicePointer(in) || !IsDevicePointer(out);
    const void* send = in;
    void* receive = out;
    if (on_host) {
      if (absl::Status s = EnsureStaging(bytes * (size_ + 1), op); !s.ok()) return Break(s);
      send = staging_;
      receive = static_cast<char*>(staging_) + bytes;
    }
    return Run(
        op, timeout,
        [&]() -> absl::Status {
          if (on_host) {
            cudaError_t err = cudaMemcpyAsync(const_cast<void*>(send), in, bytes,
                                              cudaMemcpyHostToDevice, stream_);
            if (err != cudaSuccess) return CudaError(op, err);
          }
          ncclResult_t r = ncclAllGather(send, receive, bytes, ncclUint8, comm_, stream_);
          if (r != ncclSuccess && r != ncclInProgress) return NcclError(op, r);
          return absl::OkStatus();
        },
        [&]() -> absl::Status {
          if (!on_host) return absl::OkStatus();
          cudaError_t err =
              cudaMemcpyAsync(out, receive, bytes * size_, cudaMemcpyDeviceToHost, stream_);
          if (err != cudaSuccess) return CudaError(op, err);
          return absl::OkStatus();
        });
  }

  absl::Status Broadcast(void* data, size_t bytes, int root, absl::Duration timeout) override {
    const std::string op = Name("Broadcast");
    if (absl::Status s = Check(data, bytes, timeout, op); !s.ok()) return s;
    if (absl::Status s = CheckRoot(root, size_, op); !s.ok()) return s;
    if (!broken_.ok() || bytes == 0) return broken_;
    // Host buffers (the target group's step messages) are staged through device memory.
    const bool on_host = !IsDevicePointer(data);
    void* buffer = data;
    if (on_host) {
      if (absl::Status s = EnsureStaging(bytes, op); !s.ok()) return Break(s);
      buffer = staging_;
    }
    return Run(
        op, timeout,
        [&]() -> absl::Status {
          if (on_host && rank_ == root) {
            cudaError_t err = cudaMemcpyAsync(buffer, data, bytes, cudaMemcpyHostToDevice, stream_);
            if (err != cudaSuccess) return CudaError(op, err);
          }
          ncclResult_t r = ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, comm_, stream_);
          if (r != ncclSuccess && r != ncclInProgress) return NcclError(op, r);
          return absl::OkStatus();
        },
        [&]() -> absl::Status {
          if (!on_host || rank_ == root) return absl::OkStatus();
          cudaError_t err = cudaMemcpyAsync(data, buffer, bytes, cudaMemcpyDeviceToHost, stream_);
          if (err != cudaSuccess) return CudaError(op, err);
          return absl::OkStatus();
        });
  }

  absl::Status Barrier(absl::Duration timeout) override {
    const std::string op = Name("Barrier");
    if (absl::Status s = CheckTimeout(timeout, op); !s.ok()) return s;
    if (!broken_.ok()) return broken_;
    if (absl::Status s = EnsureScratch(sizeof(float), op); !s.ok()) return Break(s);
    return Run(op, timeout, [&]() -> absl::Status {
      float* one = static_cast<float*>(scratch_);
      ncclResult_t r = ncclAllReduce(one, one, 1, ncclFloat, ncclSum, comm_, stream_);
      if (r != ncclSuccess && r != ncclInProgress) return NcclError(op, r);
      return absl::OkStatus();
    });
  }

 private:
  std::string Name(absl::string_view op) const {
    return absl::StrCat("nccl ", op, " (rank ", rank_, " of ", size_, ", device ", device_, ")");
  }

  static absl::Status Check(const void* data, size_t bytes, absl::Duration timeout,
                            absl::string_view op) {
    if (absl::Status s = CheckBuffer(data, bytes, op); !s.ok()) return s;
    return CheckTimeout(timeout, op);
  }

  absl::Status Break(absl::Status status) {
    if (broken_.ok()) {
      broken_ = absl::Status(status.code(),
                             absl::StrCat("communicator failed earlier: ", status.message()));
    }
    return status;
  }

  // True for device (or managed) memory; false for host memory, which NCCL cannot read.
  static bool IsDevicePointer(const void* p) {
    cudaPointerAttributes attributes;
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      cudaGetLastError();  // Unregistered host memory on older runtimes: clear it.
      return false;
    }
    return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  }

  // Grows the device staging buffer for host-memory calls (reused across calls).
  absl::Status EnsureStaging(size_t bytes, absl::string_view op) {
    if (bytes <= staging_bytes_) return absl::OkStatus();
    if (staging_ != nullptr) cudaFree(staging_);
    staging_ = nullptr;
    staging_bytes_ = 0;
    if (cudaError_t err = cudaMalloc(&staging_, bytes); err != cudaSuccess) {
      return CudaError(absl::StrCat(op, ": allocating ", bytes, " bytes of staging"), err);
    }
    staging_bytes_ = bytes;
    return absl::OkStatus();
  }

  // Grows the device scratch buffer (never shrinks; reused across calls).
  absl::Status EnsureScratch(size_t bytes, absl::string_view op) {
    if (bytes <= scratch_bytes_) return absl::OkStatus();
    if (cudaSetDevice(device_) != cudaSuccess) return CudaError(op, cudaGetLastError());
    if (scratch_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaFree(scratch_);
      scratch_ = nullptr;
      scratch_bytes_ = 0;
    }
    if (cudaError_t err = cudaMalloc(&scratch_, bytes); err != cudaSuccess) {
      scratch_ = nullptr;
      return CudaError(absl::StrCat(op, ": allocating ", bytes, " bytes of scratch"), err);
    }
    scratch_bytes_ = bytes;
    return absl::OkStatus();
  }

  // Enqueues NCCL work with `enqueue`, waits until NCCL has finished enqueuing it
  // (non-blocking communicator), runs `after` (more work on the same stream), then waits
  // for the stream while polling NCCL's error state. On timeout or error aborts the
  // NCCL communicator and breaks this one.
  template <typename Enqueue, typename After>
  absl::Status Run(absl::string_view op, absl::Duration timeout, Enqueue&& enqueue, After&& after) {
    const absl::Time start = absl::Now();
    const absl::Time deadline = start + timeout;
    if (cudaError_t err = cudaSetDevice(device_); err != cudaSuccess) {
      return Break(CudaError(op, err));
    }
    absl::Status status = enqueue();
    if (status.ok()) status = WaitForComm(comm_, deadline, op);
    if (status.ok()) status = after();
    while (status.ok()) {
      cudaError_t done = cudaStreamQuery(stream_);
      if (done == cudaSuccess) return absl::OkStatus();
      if (done != cudaErrorNotReady) {
        status = CudaError(op, done);
        break;
      }
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        status = NcclError(absl::StrCat(op, ": a peer failed"), state);
        break;
      }
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        status = absl::DeadlineExceededError(absl::StrCat(op, ": not complete after ",
                                                          absl::FormatDuration(timeout),
                                                          " (a peer is missing or stalled)"));
        break;
      }
      // Spin briefly (most collectives finish within microseconds), then back off.
      if (now - start < absl::Microseconds(200)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    // Abort releases the kernels stuck waiting for peers.
    ncclCommAbort(comm_);
    comm_ = nullptr;
    return Break(status);
  }

  template <typename Enqueue>
  absl::Status Run(absl::string_view op, absl::Duration timeout, Enqueue&& enqueue) {
    return Run(op, timeout, std::forward<Enqueue>(enqueue), [] { return absl::OkStatus(); });
  }

  const int rank_;
  const int size_;
  const int device_;
  ncclComm_t comm_;
  cudaStream_t stream_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  void* staging_ = nullptr;  // Device copy of host buffers (Broadcast, AllGather).
  size_t staging_bytes_ = 0;
  absl::Status broken_;
};

}  // namespace

bool NcclCompiledIn() { return true; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(int rank, int size,
                                                                     Store& store,
                                                                     const NcclOptions& options) {
  const std::string where = absl::StrCat("nccl rank ", rank, " of ", size);
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rank outside the group"));
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": connect_timeout must be positive"));
  }
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  int devices = 0;
  if (cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess || devices == 0) {
    std::string why = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device present";
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat(where, ": no usable CUDA device: ", why));
  }
  const int device = options.device >= 0 ? options.device : rank % devices;
  if (device >= devices) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": device ", device, " requested, ", devices, " visible"));
  }
  if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) {
    return CudaError(absl::StrCat(where, ": selecting device ", device), err);
  }

  ncclUniqueId id;
  if (rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return NcclError(absl::StrCat(where, ": creating the unique id"), r);
    }
    absl::Status set = store.Set(kUniqueIdKey, absl::string_view(id.internal, sizeof(id)));
    if (!set.ok()) {
      return absl::Status(set.code(),
                          absl::StrCat(where, ": publishing the unique id: ", set.message()));
    }
  } else {
    absl::StatusOr<std::string> value = store.GetOne(kUniqueIdKey, options.connect_timeout);
    if (!value.ok()) {
      return absl::Status(
          value.status().code(),
          absl::StrCat(where, ": reading rank 0's unique id: ", value.status().message()));
    }
    if (value->size() != sizeof(id)) {
      return absl::DataLossError(absl::StrCat(where, ": the unique id in the store has ",
                                              value->size(), " bytes, expected ", sizeof(id)));
    }
    std::memcpy(id.internal, value->data(), sizeof(id));
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // lets initialisation be bounded by the deadline
  ncclComm_t comm = nullptr;
  ncclResult_t init = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (init != ncclSuccess && init != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    return NcclError(absl::StrCat(where, ": initialising"), init);
  }
  if (absl::Status s = WaitForComm(comm, deadline, absl::StrCat(where, ": initialising"));
      !s.ok()) {
    ncclCommAbort(comm);
    return s;
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    ncclCommAbort(comm);
    return CudaError(absl::StrCat(where, ": creating a stream"), err);
  }
  return std::unique_ptr<Communicator>(new NcclCommunicator(rank, size, device, comm, stream));
}

}  // namespace tandem
