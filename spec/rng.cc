#include "spec/rng.h"

namespace tandem {
namespace spec {
namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // Golden ratio.
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1.

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  *lo = static_cast<uint32_t>(product);
}

}  // namespace

PhiloxCounter Philox4x32_10(const PhiloxCounter& counter, const PhiloxKey& key) {
  PhiloxCounter x = counter;
  PhiloxKey k = key;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kWeyl0;
      k[1] += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kMultiplier0, x[0], &hi0, &lo0);
    MulHiLo(kMultiplier1, x[2], &hi1, &lo1);
    x = {hi1 ^ x[1] ^ k[0], lo1, hi0 ^ x[3] ^ k[1], lo0};
  }
  return x;
}

double UnitDoubleFromBits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

double UniformDouble(uint64_t seed, RandomStream stream, uint64_t position,
                     uint32_t draw) {
  const PhiloxKey key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  const PhiloxCounter counter = {static_cast<uint32_t>(position),
                                 static_cast<uint32_t>(position >> 32), draw,
                                 static_cast<uint32_t>(stream)};
  const PhiloxCounter out = Philox4x32_10(counter, key);
  return UnitDoubleFromBits((static_cast<uint64_t>(out[0]) << 32) | out[1]);
}

}  // namespace spec
}  // namespace tandem
