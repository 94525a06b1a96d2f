#include "kernels/cpu/simd.h"

#include <cstdlib>
#include <cstring>

namespace tandem {
namespace cpu {

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512Vnni:
      return "avx512vnni";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kPortable:
      break;
  }
  return "portable";
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

bool CpuHasAvx512Vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return CpuHasAvx2Fma() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

SimdLevel SupportedSimdLevel(SimdLevel level) {
  if (level == SimdLevel::kAvx512Vnni && !CpuHasAvx512Vnni()) level = SimdLevel::kAvx2;
  if (level == SimdLevel::kAvx2 && !CpuHasAvx2Fma()) level = SimdLevel::kPortable;
  return level;
}

SimdLevel DetectSimdLevel() {
  const char* forced = std::getenv("TANDEM_CPU_SIMD");
  if (forced != nullptr && std::strcmp(forced, "portable") == 0) return SimdLevel::kPortable;
  if (forced != nullptr && std::strcmp(forced, "avx2") == 0) {
    return SupportedSimdLevel(SimdLevel::kAvx2);
  }
  return SupportedSimdLevel(SimdLevel::kAvx512Vnni);
}

std::vector<SimdLevel> AvailableSimdLevels() {
  std::vector<SimdLevel> levels = {SimdLevel::kPortable};
  if (CpuHasAvx2Fma()) levels.push_back(SimdLevel::kAvx2);
  if (CpuHasAvx512Vnni()) levels.push_back(SimdLevel::kAvx512Vnni);
  return levels;
}

}  // namespace cpu
}  // namespace tandem
