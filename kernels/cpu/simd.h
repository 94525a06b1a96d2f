// Instruction-set selection for the CPU kernels. Every kernel has a portable C++ path
// and an AVX2+FMA+F16C path (F16C widens f16 weights; every AVX2 CPU has it); the
// caller passes the level explicitly so tests can run both.
#ifndef TANDEM_KERNELS_CPU_SIMD_H_
#define TANDEM_KERNELS_CPU_SIMD_H_

#include <vector>

namespace tandem {
namespace cpu {

enum class SimdLevel { kPortable, kAvx2 };

// "portable" or "avx2".
const char* SimdLevelName(SimdLevel level);

// True when this CPU executes AVX2, FMA and F16C instructions.
bool CpuHasAvx2Fma();

// The level kernels should use on this machine: kAvx2 when the CPU supports it, unless
// the environment variable TANDEM_CPU_SIMD is set to "portable".
SimdLevel DetectSimdLevel();

// Every level this CPU can execute (kPortable first); tests iterate over it.
std::vector<SimdLevel> AvailableSimdLevels();

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_SIMD_H_
