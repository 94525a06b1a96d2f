// Counter-based random numbers for seeded, batching-independent sampling.
//
// Every random draw is a pure function of (seed, stream, position, draw): no state, so
// the value used for a generated position never depends on how sequences are batched,
// on which worker computes it, or on how many other draws happened before.
#ifndef TANDEM_SPEC_RNG_H_
#define TANDEM_SPEC_RNG_H_

#include <array>
#include <cstdint>

namespace tandem {
namespace spec {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// maps a 128-bit counter and a 64-bit key to 128 pseudo-random bits with 10 rounds.
// Words are given and returned least significant first, as in Random123.
using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;
PhiloxCounter Philox4x32_10(const PhiloxCounter& counter, const PhiloxKey& key);

// Independent random streams. Each decision of the speculation loop reads its own
// stream, so e.g. the draft's sampling uniform and the target's acceptance uniform at
// the same position are independent.
enum class RandomStream : uint32_t {
  kDraftSample = 0,  // The draft model sampling proposal d at a position.
  kAccept = 1,       // The acceptance test u of a proposal at a position (draw = the
                     // sibling's rank on a tree, spec/tree_acceptance.h; 0 on a chain).
  kResample = 2,     // Target-side sampling at a position: correction, bonus token and
                     // plain (non-speculative) decoding all use it, so K = 0 matches
                     // target-only sampling draw for draw.
  kProposer = 3,     // Spare stream for proposers other than the draft model.
  kGumbel = 4,       // Gumbel noise of the coupled rule: draw = token id, position = the
                     // token's absolute position in the sequence (GumbelNoise below).
};

// Maps 64 random bits to a double in [0, 1): the top 53 bits times 2^-53. Never 1.
double UnitDoubleFromBits(uint64_t bits);

// Uniform double in [0, 1) for generated position `position` of a request with seed
// `seed`, in stream `stream`; `draw` numbers further independent draws at the same
// position (0 for the first). Philox key = seed; counter = (position low word,
// position high word, draw, stream).
double UniformDouble(uint64_t seed, RandomStream stream, uint64_t position, uint32_t draw = 0);

// Standard Gumbel noise g = -ln(-ln u) of token `token` at absolute sequence position
// `position`, u = UniformDouble(seed, kGumbel, position, token); -inf when u == 0
// (probability 2^-53). The coupled acceptance rule (spec/acceptance.h) samples every
// position as argmax_v(ln p(v) + g(v)) with it, on the target and on the draft alike.
double GumbelNoise(uint64_t seed, uint64_t position, int32_t token);

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_RNG_H_
