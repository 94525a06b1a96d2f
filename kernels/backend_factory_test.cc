// Backend selection by name. The cuda cases check the error without a device and the
// backend's identity with one.
#include "kernels/backend_factory.h"

#include <gtest/gtest.h>

#include "kernels/cuda/device.h"

namespace tandem {
namespace {

TEST(BackendFactoryTest, Cpu) {
  auto backend = MakeBackend("cpu", 1, 0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
}

TEST(BackendFactoryTest, UnknownNameAndNegativeDevice) {
  EXPECT_EQ(MakeBackend("tpu", 1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeBackend("cuda", 1, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BackendFactoryTest, Cuda) {
  std::string why;
  const int devices = cuda::DeviceCount(&why);
  // Rank-style device numbers wrap around the visible devices.
  auto backend = MakeBackend("cuda", 1, devices + 1);
  if (devices == 0) {
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.status().code(), cuda::CompiledWithCuda() ? absl::StatusCode::kUnavailable
                                                                : absl::StatusCode::kUnimplemented);
    EXPECT_EQ(backend.status().message().rfind("CUDA backend not available", 0), 0u)
        << backend.status();
    std::printf("no CUDA device: %s\n", backend.status().ToString().c_str());
    return;
  }
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cuda");
}

}  // namespace
}  // namespace tandem
