// Lookahead decoding's pure logic (Fu et al., ICML 2024, arXiv 2402.02057), no model:
// the n-gram pool, the Jacobi window and the layout of one step's nodes. The
// coordinator's LookaheadProposer (lookahead_proposer.h) owns one NgramPool and one
// JacobiWindow per sequence; the target leader only computes the window's next level
// (worker/lookahead_proposer.h).
//
// One step (N = the n-gram length, W = the window width, G = the guesses per step):
//  * the verification branch: the pool's continuations (N - 1 tokens each) of the last
//    committed token, at most G, merged into a trie (shared prefixes once, siblings
//    distinct), children of the root: the nodes acceptance may accept;
//  * the lookahead branch (the window): levels 0 .. L - 1 (L <= N - 1 filled), W
//    columns each. Level 0 column j's parent is level 0 column j - 1 (column 0: the
//    root); level l > 0 column j's parent is level l - 1 column j. So node (l, j) sits at
//    depth j + 1 + l and attends to the root, level 0 columns 0..j and levels 1..l - 1
//    of column j: exactly the paper's mask (each level causal on level 0, then along
//    its diagonal), as the ancestor closure of this parent relation. Computed only,
//    never accepted (VerifySequence.num_acceptable = the trie's nodes).
// The target returns the argmax of every window node's row; Advance turns the newest
// level's into the next level and, once the window is full, the W n-grams of its
// columns.
#ifndef TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_WINDOW_H_
#define TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_WINDOW_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace tandem::coordinator {

// W, N, G of one request (validated by coordinator/request_validation.h).
struct LookaheadConfig {
  int window = 2;       // W >= 1.
  int ngram = 3;        // N >= 2: N - 1 levels, continuations of N - 1 tokens.
  int max_guesses = 2;  // G >= 0: continuations per key kept and verified per step.
  // The client set W / G: honoured exactly. Unset, they are caps within which the
  // coordinator sizes each step (spec/lookahead_sizing.h).
  bool fixed_window = false;
  bool fixed_guesses = false;
};

// Most nodes one step of `config` sends: (W + G) * (N - 1).
int LookaheadMaxNodes(const LookaheadConfig& config);

// N-grams keyed by their first token; per key at most `max_per_key` distinct
// continuations (the other N - 1 tokens), least recently added evicted first. Each
// remembers its source: kCommittedSource for the prompt's and committed tokens', else
// the lowest window column that completed it (the sizing's counterfactual).
class NgramPool {
 public:
  static constexpr int kCommittedSource = -1;
  // `length` = N >= 2; `max_per_key` = G >= 0 (0 keeps nothing).
  NgramPool(int length, int max_per_key);

  // Adds `ngram` (exactly N tokens; other sizes are ignored) from `source`: a
  // continuation already kept under its key becomes the most recent (its source the
  // lower of the two), a new one is inserted as the most recent and evicts the least
  // recent beyond max_per_key.
  void Add(absl::Span<const int32_t> ngram, int source = kCommittedSource);
  // Adds every N-gram of `tokens`, in order (the prompt, committed tokens).
  void AddAll(absl::Span<const int32_t> tokens);
  // The continuations of `key`, most recent first (empty when none).
  std::vector<std::vector<int32_t>> Find(int32_t key) const;
  // The sources of Find(key)'s continuations, in the same order.
  std::vector<int> Sources(int32_t key) const;
  int size() const { return size_; }  // N-grams kept, all keys.

 private:
  struct Entry {
    std::vector<int32_t> continuation;
    int source;
  };
  int length_, max_per_key_;
  int size_ = 0;
  absl::flat_hash_map<int32_t, std::deque<Entry>> by_key_;  // Newest first.
};

// The Jacobi window: up to `levels` = N - 1 levels of W tokens each, level 0 oldest.
class JacobiWindow {
 public:
  // `window` = W >= 1, `levels` = N - 1 >= 1. Level 0 is filled from `context` (its
  // last W tokens, repeated from its start when it is shorter; zeros when empty): the
  // paper leaves the initial guesses open and the reference picks random prompt tokens;
  // recent context is deterministic and as good a guess.
  JacobiWindow(int window, int levels, absl::Span<const int32_t> context);

  int window() const { return window_; }
  int filled() const { return static_cast<int>(levels_.size()); }  // 1..levels.
  const std::vector<std::vector<int32_t>>& levels() const { return levels_; }

  // One Jacobi update from the target's argmax at each newest-level node (`next`, W
  // tokens; another size leaves the window unchanged and returns false). Warming up
  // (filled < levels) it appends `next` as a level; once full it appends to *ngrams the
  // W n-grams (column j: levels 0..L-1 at j, then next[j]), drops level 0 and appends
  // `next`.
  bool Advance(absl::Span<const int32_t> next, std::vector<std::vector<int32_t>>* ngrams);
  // Sets the width to `width` (>= 1) for the next steps, keeping the levels: fewer
  // columns drop the last ones (column j depends only on columns <= j, so the rest
  // stays a valid window); more repeat each level's columns from its start (new
  // guesses: any tokens are, and Jacobi iteration refines them).
  void Resize(int width);

 private:
  int window_, max_levels_;
  std::vector<std::vector<int32_t>> levels_;
};

// One step's nodes: the verification trie first (`acceptable` nodes), then the window
// level-major; parents as above (-1 = the root).
struct LookaheadStep {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
  int acceptable = 0;
};

// The step for a sequence whose last committed token is `last`: at most `max_guesses`
// continuations of `last` from `pool`, then `window` (when `with_window`), when all of
// it fits in `max_nodes`; the window is left out when it does not fit, and the guesses
// are cut to what is left of `max_nodes` (the last one kept may be a prefix).
LookaheadStep BuildLookaheadStep(const NgramPool& pool, const JacobiWindow& window, int32_t last,
                                 int max_guesses, int max_nodes, bool with_window = true);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_WINDOW_H_
