// The Philox4x32-10 generator and the uniform double of spec/rng.h as inline functions
// that compile for the host and for CUDA devices, so the device acceptance kernel draws
// exactly the numbers spec::UniformDouble draws. spec/rng.h is the documented API;
// this header is its implementation.
#ifndef TANDEM_SPEC_PHILOX_H_
#define TANDEM_SPEC_PHILOX_H_

#include <cmath>
#include <cstdint>

#include "spec/host_device.h"

namespace tandem {
namespace spec {
namespace philox {

// Philox4x32-10 in place: x = counter words (least significant first) -> output words;
// key = (k0, k1).
TANDEM_HOST_DEVICE inline void Rounds(uint32_t x[4], uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u;
  constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // Golden ratio.
  constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1.
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * x[0];
    const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * x[2];
    const uint32_t hi0 = static_cast<uint32_t>(product0 >> 32),
                   lo0 = static_cast<uint32_t>(product0);
    const uint32_t hi1 = static_cast<uint32_t>(product1 >> 32),
                   lo1 = static_cast<uint32_t>(product1);
    const uint32_t y0 = hi1 ^ x[1] ^ k0, y2 = hi0 ^ x[3] ^ k1;
    x[0] = y0;
    x[1] = lo1;
    x[2] = y2;
    x[3] = lo0;
  }
}

// The top 53 of 64 random bits times 2^-53: a double in [0, 1), never 1.
TANDEM_HOST_DEVICE inline double UnitDouble(uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

// spec::UniformDouble(seed, stream, position, draw) (spec/rng.h), stream as its number.
TANDEM_HOST_DEVICE inline double Uniform(uint64_t seed, uint32_t stream, uint64_t position,
                                         uint32_t draw) {
  uint32_t x[4] = {static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), draw,
                   stream};
  Rounds(x, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return UnitDouble((static_cast<uint64_t>(x[0]) << 32) | x[1]);
}

// Natural logarithm in double, the same function on the host and in device code.
TANDEM_HOST_DEVICE inline double Ln(double x) {
#if defined(__CUDA_ARCH__)
  return ::log(x);
#else
  return std::log(x);
#endif
}

// spec::GumbelNoise(seed, position, token) (spec/rng.h): -ln(-ln u) with
// u = Uniform(seed, stream 4 = kGumbel, position, token); -inf when u == 0.
TANDEM_HOST_DEVICE inline double Gumbel(uint64_t seed, uint64_t position, uint32_t token) {
  const double u = Uniform(seed, 4u, position, token);
  return -Ln(-Ln(u));
}

// The coupled rule's score of `token` with processed probability `p` (spec/sampling.h
// GumbelSample): p / E with E = -ln u, u = Uniform(seed, 4 = kGumbel, position, token), for
// p > 0 and finite; NaN (not in the support, skipped by argmax) otherwise. Its log is
// ln p + Gumbel(seed, position, token), so the argmax is that of ln p + g, with one
// logarithm per token instead of two (u == 0 gives E = inf and score 0).
TANDEM_HOST_DEVICE inline double GumbelScore(float p, uint64_t seed, uint64_t position,
                                             uint32_t token) {
  const double x = p;
  if (!(x > 0.0) || x - x != 0.0) return static_cast<double>(NAN);
  return x / -Ln(Uniform(seed, 4u, position, token));
}

}  // namespace philox
}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_PHILOX_H_
