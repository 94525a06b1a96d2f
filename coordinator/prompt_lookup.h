// Prompt-lookup decoding: an n-gram proposer over one sequence's own tokens (prompt
// and generated so far), no model.
//
// Matching: the last n tokens of the context (n from max_ngram down to min_ngram, the
// first n that occurred earlier wins) are looked up among their earlier occurrences
// (ones that start before the suffix itself, overlap allowed).
//  * Propose(k), a chain: the up to k tokens that followed the most recent occurrence.
//  * ProposeTree(depth, max_nodes), a token tree: the continuations (up to `depth`
//    tokens each) of the occurrences of that n-gram, most recent first, merged into a
//    trie (a shared prefix is one path; siblings carry distinct tokens; a node's index
//    is after its parent's, and siblings are in recency order). At most max_branches
//    occurrences contribute nodes (an occurrence whose continuation is already a path
//    of the trie adds none and does not count), so the tree has at most max_branches
//    leaves; at most `max_nodes` nodes (a continuation is cut where the budget ends).
//    The occurrences looked at are the n-gram's latest starts_kept(); with
//    max_branches = 1 the tree is exactly Propose(depth)'s chain.
// Fewer tokens come back when a continuation runs into the end of the context; none
// when no n-gram matches. Deterministic: the proposal is a function of the context and
// the options only.
//
// Cost: an index maps every n-gram (min_ngram..max_ngram) to its latest S =
// starts_kept() starts (S = 1 for chains, 2 * max_branches for trees), so Append is
// O(tokens * max_ngram * (max_ngram + S)), Propose is O(max_ngram^2 + k) and
// ProposeTree O(max_ngram^2 + S * depth * max_nodes): independent of the context
// length. Memory: up to (max_ngram - min_ngram + 1) index entries per token.
// Not thread-safe; one instance per sequence.
#ifndef TANDEM_COORDINATOR_PROMPT_LOOKUP_H_
#define TANDEM_COORDINATOR_PROMPT_LOOKUP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem::coordinator {

struct PromptLookupOptions {
  int min_ngram = 1;     // [1, max_ngram]
  int max_ngram = 3;     // [min_ngram, kMaxNgram]
  int max_branches = 1;  // [1, kMaxBranches]: distinct continuations of a tree.
  static constexpr int kMaxNgram = 16;
  static constexpr int kMaxBranches = 16;

  // Starts kept per n-gram (the occurrences a tree looks at): 1 for chains; for trees
  // twice the branches, as recent occurrences often repeat a continuation.
  int starts_kept() const { return max_branches == 1 ? 1 : 2 * max_branches; }
};

// A token tree: parents[i] in [-1, i) (-1: a child of the last context token).
struct PromptLookupTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;

  int size() const { return static_cast<int>(tokens.size()); }
  // Whether every node is the child of the one before it (or the tree is empty).
  bool IsChain() const;
};

class PromptLookup {
 public:
  // Default options (n-grams of 3, 2, then 1 tokens; chains).
  PromptLookup();
  // INVALID_ARGUMENT when the n-gram bounds or max_branches are out of range.
  static absl::StatusOr<PromptLookup> Create(const PromptLookupOptions& options);

  // Appends committed tokens to the context (any int32 values).
  void Append(absl::Span<const int32_t> tokens);

  // Up to `k` proposed next tokens (empty when k <= 0 or nothing matches).
  std::vector<int32_t> Propose(int k) const;
  // A tree of depth <= `depth` and at most `max_nodes` nodes (empty when either is
  // <= 0 or nothing matches).
  PromptLookupTree ProposeTree(int depth, int max_nodes) const;

  size_t size() const { return context_.size(); }
  const std::vector<int32_t>& context() const { return context_; }
  const PromptLookupOptions& options() const { return options_; }

 private:
  // Earlier starts of one n-gram, oldest first, at most options_.starts_kept().
  using Starts = absl::InlinedVector<size_t, 1>;

  explicit PromptLookup(const PromptLookupOptions& options);

  // Key bytes of the n-gram of `n` tokens starting at `start` (native byte order).
  absl::string_view KeyAt(size_t start, int n) const;
  // The earlier starts of the longest matching suffix n-gram (its length in *n);
  // nullptr when none matches.
  const Starts* Match(int* n) const;
  // Merges the up to `depth` tokens from `from` into `tree` within `max_nodes`;
  // whether it added a node.
  bool AddContinuation(size_t from, int depth, int max_nodes, PromptLookupTree* tree) const;

  PromptLookupOptions options_;
  std::vector<int32_t> context_;
  // index_[n - min_ngram]: n-gram bytes -> its latest starts among n-grams that end
  // before the last token (so a lookup never finds the suffix itself).
  std::vector<absl::flat_hash_map<std::string, Starts>> index_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROMPT_LOOKUP_H_
