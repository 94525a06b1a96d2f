// Random verify batches for the acceptance tests (kernels/accept and the CUDA test):
// awkward logit rows, sampling settings, chains with exact sparse proposal
// distributions, and a comparison of outcomes. Test-only.
#ifndef TANDEM_KERNELS_ACCEPT_ACCEPT_TEST_UTIL_H_
#define TANDEM_KERNELS_ACCEPT_ACCEPT_TEST_UTIL_H_

#include <random>
#include <string>
#include <vector>

#include "kernels/accept/verify_accept.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"

namespace tandem {
namespace accept {
namespace testing {

// Logits of one row. Kinds: 0 smooth, 1 peaked, 2 quantized (many exact ties),
// 3 with -inf/NaN holes, 4 with +inf entries, 5 all NaN, 6 all -inf.
std::vector<float> RandomRow(std::mt19937_64& rng, int vocab, int kind);

// A valid sampling configuration: greedy (temperature 0) when `greedy`, else a random
// temperature with top-k / top-p on or off.
spec::SamplingConfig RandomSampling(std::mt19937_64& rng, int vocab, bool greedy);

// A chain of K proposals drawn from a perturbed copy of the target rows first_row..
// (in row-major `logits`), with the exact sparse q (top 32) they were drawn from, so
// every rule accepts some proposals and rejects others (coupled: the draft's Gumbel-max
// proposals with point-mass q).
VerifyChain RandomChain(std::mt19937_64& rng, const std::vector<float>& logits, int vocab,
                        int first_row, int k, spec::AcceptanceRule rule);

// Row-major logits and `num_chains` chains over them (K 0..7, rules in turn from
// `first_rule`, random row kinds, rarely all NaN).
struct RandomBatch {
  std::vector<float> logits;
  std::vector<VerifyChain> chains;
  int rows = 0;
  int proposals = 0;
};
RandomBatch MakeRandomBatch(std::mt19937_64& rng, int vocab, int num_chains, int first_rule);

// Tree shapes for RandomTree: kAnyTree draws each parent at random; kWide puts every node
// under the root; kBinary fills a binary tree level by level; kPath is a chain given as
// a tree (parents i - 1).
enum class TreeShape { kAnyTree, kWide, kBinary, kPath };

// A tree of K nodes over rows first_row..first_row + K of row-major `logits` (row
// first_row is p_root, first_row + v + 1 the row after node v). Each node's siblings
// are drawn without replacement from a perturbed copy of their parent's row (top 32),
// each sending its q without the earlier siblings' tokens (spec/tree_acceptance.h), so
// every rule accepts some nodes, later siblings included; under greedy and coupled the
// first child is the draft's argmax / Gumbel-max token and the others other tokens,
// with point masses.
VerifyChain RandomTree(std::mt19937_64& rng, const std::vector<float>& logits, int vocab,
                       int first_row, int k, TreeShape shape, spec::AcceptanceRule rule);

// MakeRandomBatch with trees: each item a RandomTree (K 1..9, shapes in turn) or, one in
// four, a RandomChain; rules in turn from `first_rule`.
RandomBatch MakeRandomTreeBatch(std::mt19937_64& rng, int vocab, int num_items, int first_rule);

// Row-major logits -> the LogitsView layout of `parts` vocabulary slices.
std::vector<float> Sliced(const std::vector<float>& row_major, int rows, int vocab, int parts);

// Same statuses, committed tokens, counts and paths; log-probabilities within 1e-5 relative
// (infinities equal). gtest assertions labelled with `where`.
void ExpectSameOutcomes(const std::vector<VerifyOutcome>& expected,
                        const std::vector<VerifyOutcome>& got, const std::string& where);

}  // namespace testing
}  // namespace accept
}  // namespace tandem

#endif  // TANDEM_KERNELS_ACCEPT_ACCEPT_TEST_UTIL_H_
