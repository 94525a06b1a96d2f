#include "kernels/cpu/simd.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace cpu {
namespace {

SimdLevel Best() {
  if (CpuHasAvx512Vnni()) return SimdLevel::kAvx512Vnni;
  return CpuHasAvx2Fma() ? SimdLevel::kAvx2 : SimdLevel::kPortable;
}

TEST(SimdTest, LevelsMatchTheCpu) {
  const auto levels = AvailableSimdLevels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels[0], SimdLevel::kPortable);
  EXPECT_EQ(levels.back(), Best());
  EXPECT_EQ(levels.size(), 1u + CpuHasAvx2Fma() + CpuHasAvx512Vnni());
  EXPECT_TRUE(!CpuHasAvx512Vnni() || CpuHasAvx2Fma());  // VNNI implies the AVX2 level.
  EXPECT_EQ(std::string(SimdLevelName(SimdLevel::kAvx512Vnni)), "avx512vnni");
  EXPECT_EQ(std::string(SimdLevelName(SimdLevel::kAvx2)), "avx2");
  EXPECT_EQ(std::string(SimdLevelName(SimdLevel::kPortable)), "portable");
  EXPECT_FALSE(UsesAvx2(SimdLevel::kPortable));
  EXPECT_TRUE(UsesAvx2(SimdLevel::kAvx2));
  EXPECT_TRUE(UsesAvx2(SimdLevel::kAvx512Vnni));
}

TEST(SimdTest, SupportedLevelNeverExceedsTheCpu) {
  EXPECT_EQ(SupportedSimdLevel(SimdLevel::kPortable), SimdLevel::kPortable);
  EXPECT_EQ(SupportedSimdLevel(SimdLevel::kAvx512Vnni), Best());
  EXPECT_EQ(SupportedSimdLevel(SimdLevel::kAvx2),
            CpuHasAvx2Fma() ? SimdLevel::kAvx2 : SimdLevel::kPortable);
}

TEST(SimdTest, EnvironmentForcesALowerLevel) {
  unsetenv("TANDEM_CPU_SIMD");
  EXPECT_EQ(DetectSimdLevel(), Best());
  setenv("TANDEM_CPU_SIMD", "portable", 1);
  EXPECT_EQ(DetectSimdLevel(), SimdLevel::kPortable);
  setenv("TANDEM_CPU_SIMD", "avx2", 1);
  EXPECT_EQ(DetectSimdLevel(), CpuHasAvx2Fma() ? SimdLevel::kAvx2 : SimdLevel::kPortable);
  setenv("TANDEM_CPU_SIMD", "anything-else", 1);
  EXPECT_EQ(DetectSimdLevel(), Best());
  unsetenv("TANDEM_CPU_SIMD");
}

}  // namespace
}  // namespace cpu
}  // namespace tandem
