#include "kernels/cpu/simd.h"

#include <cstdlib>
#include <cstring>

namespace tandem {
namespace cpu {

const char* SimdLevelName(SimdLevel level) {
  return level == SimdLevel::kAvx2 ? "avx2" : "portable";
}

bool CpuHasAvx2Fma() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

SimdLevel DetectSimdLevel() {
  const char* forced = std::getenv("TANDEM_CPU_SIMD");
  if (forced != nullptr && std::strcmp(forced, "portable") == 0) return SimdLevel::kPortable;
  return CpuHasAvx2Fma() ? SimdLevel::kAvx2 : SimdLevel::kPortable;
}

std::vector<SimdLevel> AvailableSimdLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kPortable};
  if (CpuHasAvx2Fma()) levels.push_back(SimdLevel::kAvx2);
  return levels;
}

}  // namespace cpu
}  // namespace tandem
