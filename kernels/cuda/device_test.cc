// Checks device discovery. Runs everywhere: on machines without a GPU it checks that
// the absence is reported with a reason instead of failing or crashing.
#include "kernels/cuda/device.h"

#include <gtest/gtest.h>

namespace tandem::cuda {
namespace {

TEST(CudaDeviceTest, CountIsConsistentWithReason) {
  std::string why;
  int n = DeviceCount(&why);
  ASSERT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(why.empty()) << "no device must come with a reason";
    std::printf("no CUDA device: %s\n", why.c_str());
  } else {
    EXPECT_FALSE(DeviceDescription(0).empty());
    std::printf("CUDA device 0: %s\n", DeviceDescription(0).c_str());
  }
}

TEST(CudaDeviceTest, OutOfRangeDeviceHasNoDescription) {
  EXPECT_EQ(DeviceDescription(1 << 20), "");
}

}  // namespace
}  // namespace tandem::cuda
