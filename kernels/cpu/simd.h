// Instruction-set selection for the CPU kernels. Every kernel has a portable C++ path
// and an AVX2+FMA+F16C path (F16C widens f16 weights; every AVX2 CPU has it); the
// q8_0/q4_0 integer matmul also has an AVX-512 VNNI path (vpdpbusd on 256-bit registers,
// AVX-512VL), and the float matmul 32-register and 512-bit tiles (kernels/cpu/
// paired_tiles.h) at that level; every other kernel runs its AVX2 path there. The caller passes the
// level explicitly so tests can run each one.
#ifndef TANDEM_KERNELS_CPU_SIMD_H_
#define TANDEM_KERNELS_CPU_SIMD_H_

#include <vector>

namespace tandem {
namespace cpu {

// Ordered: each level includes the instructions of the ones before it.
enum class SimdLevel { kPortable, kAvx2, kAvx512Vnni };

// "portable", "avx2" or "avx512vnni".
const char* SimdLevelName(SimdLevel level);

// True when kernels at `level` take their AVX2 path (kAvx2 and kAvx512Vnni).
inline bool UsesAvx2(SimdLevel level) { return level != SimdLevel::kPortable; }

// True when this CPU executes AVX2, FMA and F16C instructions.
bool CpuHasAvx2Fma();

// True when this CPU executes AVX2+FMA+F16C and AVX-512 F, BW, VL and VNNI instructions.
bool CpuHasAvx512Vnni();

// The highest level this CPU supports, or a lower one forced by the environment variable
// TANDEM_CPU_SIMD: "portable", or "avx2" (kAvx2 if the CPU has it). Other values are
// ignored.
SimdLevel DetectSimdLevel();

// `level`, lowered to the highest level this CPU supports if it does not support it.
SimdLevel SupportedSimdLevel(SimdLevel level);

// Every level this CPU can execute, in order (kPortable first); tests iterate over it.
std::vector<SimdLevel> AvailableSimdLevels();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_SIMD_H_
