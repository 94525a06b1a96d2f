// Internals of DraftProposer shared by its two files: draft_proposer.cc (the mirror of
// the draft worker's cache, fresh work, Draft answers) and draft_continuation.cc (the
// speculation cache: outcomes pre-drafted while the target verifies, and their hits).
// Nothing outside the draft proposer includes this.
#ifndef TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_INTERNAL_H_
#define TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_INTERNAL_H_

#include <cstdint>
#include <vector>

#include "coordinator/proposers/proposer.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator::draft_internal {

// Top tokens asked per proposal when branches beyond the all-accepted one are wanted,
// and the most a draft reports (kernels/accept/draft_sample.h, kMaxDraftTop).
constexpr int kOutcomeTopTokens = 4;
constexpr int kMaxTop = 16;

// Whether `s`'s rule accepts deterministic sibling nodes: greedy and the coupled rule
// follow the child equal to the target's token; rejection sampling needs siblings
// drawn from q (docs/architecture.md §4, Trees).
bool TakesDeterministicSiblings(const Sequence& s);

// Turns the chain in `c` into a tree: the draft's next likeliest tokens beside chain
// nodes as leaves, most valuable first, at most `siblings` beside each node and
// `max_nodes` nodes in all. A leaf t beside d_{j+1} adds one token (the bonus after t)
// exactly when the target accepts d_1..d_j and then emits t, which the draft puts at
// P(j, t) (outcome_ranking.h); it is added only while P(j, t) > `min_value`.
void AttachSiblings(const std::vector<v1::TopTokens>& top, int siblings, int max_nodes,
                    double min_value, Candidates* c);

// The draft worker's id of slot `slot` of sequence `id`'s id pool: slot 0 is the
// sequence's own id, the others carry the slot in bits 48.. (engine ids stay below 2^48).
inline uint64_t WorkerId(uint64_t id, int slot) {
  return slot == 0 ? id : id | (uint64_t(slot) << 48);
}

// A continuation pre-drafted for one verification outcome on a branch of the draft's
// cache (the speculation cache's entry).
// Three kinds: a rejection outcome (j, t) (the target accepts j candidates, then emits
// t); a path outcome: the target accepts a whole root path of `accepted` candidates
// ending in `fed` (the chain, or a leaf sibling t beside d_{j+1}: the path d_1..d_j t)
// and emits a bonus token, which the branch guesses as proposals[0]; and a plain
// outcome: the step verifies no candidates and the target emits one token, which the
// branch (drafted on the main id itself: there is nothing to fork from) guesses as
// proposals[0].
struct Branch {
  int slot = 0;                              // Its worker id's slot.
  int accepted = 0;                          // Candidates the outcome accepts.
  int32_t token = -1;                        // A rejection's t; -1 for a path outcome.
  int32_t fed = -1;                          // A path outcome's last accepted candidate.
  std::vector<int32_t> cache;                // What the worker holds for it once drafted.
  std::vector<v1::ProposedToken> proposals;  // Empty until drafted.
  std::vector<v1::TopTokens> top;            // Parallel to proposals (when asked).
  bool plain = false;                        // A plain outcome (then slot is the main one).
};

struct DraftState : ProposerState {
  // What the draft worker has cached for the sequence's main id, position by position
  // (may run past the committed tokens after drafting). Cleared when its state is
  // unknown.
  std::vector<int32_t> cache;
  int main_slot = 0;        // The slot of the worker id that holds `cache`.
  uint32_t used_slots = 1;  // Slots whose ids were ever created on the worker (bit mask).
  // The draft's top tokens at each current candidate's position (empty: not asked).
  std::vector<v1::TopTokens> top;
  // Outcomes pre-drafted while the current candidates are verified.
  std::vector<Branch> branches;
  // Tree shape of the next candidates (PlannerOptions and spec::NodeValueThreshold, as
  // of the last AddWork or AddContinuation).
  int tree_siblings = 0;
  int max_nodes = 0;
  double node_value_threshold = 0;
  // A dynamic tree's node budget (0 = none; then no pre-drafting) and the K it was
  // asked for (the nodes kept whatever their value).
  int tree_nodes = 0;
  int tree_depth = 0;
  bool tree_option = false;  // That tree is the controller's tree option.

  // Length of the common prefix of cache and the sequence's tokens.
  int ValidLength(const std::vector<int32_t>& tokens) const {
    const size_t n = std::min(cache.size(), tokens.size());
    size_t i = 0;
    while (i < n && cache[i] == tokens[i]) ++i;
    return static_cast<int>(i);
  }
  // Records what a call fed and proposed (the last proposal is not fed):
  // cache = cache[0, start) + fed + proposals[0, K-1).
  template <typename Tokens>
  void Fed(uint32_t start, const Tokens& fed, const v1::DraftedSequence* drafted) {
    cache.resize(std::min<size_t>(cache.size(), start));
    cache.insert(cache.end(), fed.begin(), fed.end());
    if (drafted == nullptr) return;
    for (int i = 0; i + 1 < drafted->proposals_size(); ++i) {
      cache.push_back(drafted->proposals(i).token());
    }
  }
};

inline DraftState& Of(ProposerState& state) { return static_cast<DraftState&>(state); }

// Adds a Draft entry for worker id `worker_id` of `s` to `plan` (feeding [begin, end)
// from `start`, drafting `k`), recording `slot` and whether it is a continuation.
v1::DraftSequence* AddDraftEntry(Sequence* s, uint64_t worker_id, int slot, uint32_t start,
                                 const int32_t* begin, const int32_t* end, int k, bool continuation,
                                 const PlannerOptions& o, PhasePlan* plan);

}  // namespace tandem::coordinator::draft_internal

#endif  // TANDEM_COORDINATOR_PROPOSERS_DRAFT_PROPOSER_INTERNAL_H_
