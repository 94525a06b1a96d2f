// Shared by the CUDA backend tests: a fixture that owns a CudaBackend on device 0 and
// skips the test, printing "SKIPPED: no CUDA device (<reason>)", when no device
// exists (always the case in a build without CUDA), plus host<->device helpers.
#ifndef TANDEM_KERNELS_CUDA_CUDA_TEST_UTIL_H_
#define TANDEM_KERNELS_CUDA_CUDA_TEST_UTIL_H_

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device.h"

namespace tandem {
namespace cuda {
namespace testing {

// True when a CUDA device is usable; otherwise prints the skip line with `why`.
inline bool CudaDeviceOrSkipMessage(std::string* why) {
  if (DeviceCount(why) > 0) return true;
  std::printf("SKIPPED: no CUDA device (%s)\n", why->c_str());
  std::fflush(stdout);
  return false;
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CudaDeviceOrSkipMessage(&why)) GTEST_SKIP() << "no CUDA device (" << why << ")";
    auto backend = CudaBackend::Create(Options());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
  }

  // Override to test another configuration.
  virtual CudaBackendOptions Options() const { return CudaBackendOptions(); }

  // A device buffer holding `values`.
  template <typename T>
  Buffer ToDevice(const std::vector<T>& values) {
    auto buffer = backend_->Allocate(values.size() * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return Buffer();
    EXPECT_TRUE(
        backend_->CopyToDevice(values.data(), buffer->data(), values.size() * sizeof(T)).ok());
    return *std::move(buffer);
  }

  // A zeroed device buffer of `count` floats.
  Buffer Zeros(size_t count) {
    auto buffer = backend_->Allocate(count * sizeof(float));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return buffer.ok() ? *std::move(buffer) : Buffer();
  }

  // The first `count` elements of a device buffer (waits for queued work).
  template <typename T = float>
  std::vector<T> ToHost(const Buffer& buffer, size_t count) {
    std::vector<T> out(count);
    absl::Status status = backend_->CopyToHost(buffer.data(), out.data(), count * sizeof(T));
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  // A weight uploaded from float32 host data [rows, cols].
  Weight UploadF32(const std::vector<float>& data, int64_t rows, int64_t cols) {
    auto w = backend_->UploadWeight(data.data(), DType::kF32, rows, cols, nullptr);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *std::move(w) : Weight();
  }

  // MatMul of host rows x [rows, w.cols] by `w` on the device; the [rows, w.rows] result.
  std::vector<float> MatMulOnDevice(const std::vector<float>& x, int rows, const Weight& w) {
    Buffer dx = ToDevice(x);
    Buffer dout = Zeros(size_t(rows) * w.rows);
    backend_->MatMul(dx.f32(), rows, w, dout.f32());
    return ToHost(dout, size_t(rows) * w.rows);
  }

  std::unique_ptr<CudaBackend> backend_;
};

}  // namespace testing
}  // namespace cuda
}  // namespace tandem

#endif  // TANDEM_KERNELS_CUDA_CUDA_TEST_UTIL_H_
