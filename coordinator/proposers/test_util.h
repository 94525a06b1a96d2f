// Test helpers: sequences with the proposer chains a coordinator with a draft worker
// gives them, and draft answers delivered through the draft proposer.
#ifndef TANDEM_COORDINATOR_PROPOSERS_TEST_UTIL_H_
#define TANDEM_COORDINATOR_PROPOSERS_TEST_UTIL_H_

#include <memory>
#include <vector>

#include "coordinator/proposers/registry.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator::testing {

// Serves the draft model, Medusa (as if the target leader had heads) and prompt lookup.
const ProposerRegistry& TestRegistry();

// A sequence of `request` (its method picks the chain) over `prompt`; no tokenizer
// unless given (then output text is produced).
std::unique_ptr<Sequence> MakeSequence(uint64_t id, const ValidatedRequest& request,
                                       std::vector<int32_t> prompt, int max_new_tokens,
                                       const Tokenizer* tokenizer = nullptr,
                                       std::shared_ptr<OutputChannel> output = nullptr);

// The slot of `method` in `s`'s chain (-1 when absent).
int SlotOf(const Sequence& s, v1::SpeculationMethod method);

// Delivers a Draft answer of `tokens` for `s` to its draft proposer, as if the engine
// had sent it everything uncached (start 0, the whole of s.tokens()): the draft's
// cache then holds tokens() + tokens[0, K-1), and s.candidates are the tokens.
void GiveDraftCandidates(Sequence* s, const std::vector<int32_t>& tokens);

}  // namespace tandem::coordinator::testing

#endif  // TANDEM_COORDINATOR_PROPOSERS_TEST_UTIL_H_
