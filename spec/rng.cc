#include "spec/rng.h"

#include "spec/philox.h"

namespace tandem {
namespace spec {

PhiloxCounter Philox4x32_10(const PhiloxCounter& counter, const PhiloxKey& key) {
  uint32_t x[4] = {counter[0], counter[1], counter[2], counter[3]};
  philox::Rounds(x, key[0], key[1]);
  return {x[0], x[1], x[2], x[3]};
}

double UnitDoubleFromBits(uint64_t bits) { return philox::UnitDouble(bits); }

double UniformDouble(uint64_t seed, RandomStream stream, uint64_t position, uint32_t draw) {
  return philox::Uniform(seed, static_cast<uint32_t>(stream), position, draw);
}

double GumbelNoise(uint64_t seed, uint64_t position, int32_t token) {
  return philox::Gumbel(seed, position, static_cast<uint32_t>(token));
}

}  // namespace spec
}  // namespace tandem
