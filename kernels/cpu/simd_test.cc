#include "kernels/cpu/simd.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace cpu {
namespace {

TEST(SimdTest, LevelsMatchTheCpu) {
  const auto levels = AvailableSimdLevels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels[0], SimdLevel::kPortable);
  EXPECT_EQ(levels.size(), CpuHasAvx2Fma() ? 2u : 1u);
  EXPECT_EQ(std::string(SimdLevelName(SimdLevel::kAvx2)), "avx2");
  EXPECT_EQ(std::string(SimdLevelName(SimdLevel::kPortable)), "portable");
}

TEST(SimdTest, EnvironmentForcesPortable) {
  unsetenv("TANDEM_CPU_SIMD");
  EXPECT_EQ(DetectSimdLevel(), CpuHasAvx2Fma() ? SimdLevel::kAvx2 : SimdLevel::kPortable);
  setenv("TANDEM_CPU_SIMD", "portable", 1);
  EXPECT_EQ(DetectSimdLevel(), SimdLevel::kPortable);
  setenv("TANDEM_CPU_SIMD", "anything-else", 1);
  EXPECT_EQ(DetectSimdLevel(), CpuHasAvx2Fma() ? SimdLevel::kAvx2 : SimdLevel::kPortable);
  unsetenv("TANDEM_CPU_SIMD");
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
