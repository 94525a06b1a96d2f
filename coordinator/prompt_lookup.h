// Prompt-lookup decoding: an n-gram proposer over one sequence's own tokens (prompt
// and generated so far), no model.
//
// Propose(k) takes the last n tokens of the context (n from max_ngram down to
// min_ngram, first n that matches wins), finds their most recent earlier occurrence
// (one that starts before the suffix itself, overlap allowed) and proposes the up to k
// tokens that followed it. Fewer than k come back when the continuation runs into the
// end of the context; none when no n-gram matches. Deterministic: the proposal is a
// function of the context only.
//
// Cost: an index maps every n-gram (min_ngram..max_ngram) to its latest start, so
// Append is O(tokens * max_ngram^2) and Propose is O(max_ngram^2 + k), independent of
// the context length. Memory: up to (max_ngram - min_ngram + 1) index entries per token.
// Not thread-safe; one instance per sequence.
#ifndef TANDEM_COORDINATOR_PROMPT_LOOKUP_H_
#define TANDEM_COORDINATOR_PROMPT_LOOKUP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tandem::coordinator {

struct PromptLookupOptions {
  int min_ngram = 1;  // [1, max_ngram]
  int max_ngram = 3;  // [min_ngram, kMaxNgram]
  static constexpr int kMaxNgram = 16;
};

class PromptLookup {
 public:
  // Default options (n-grams of 3, 2, then 1 tokens).
  PromptLookup();
  // INVALID_ARGUMENT when the n-gram bounds are out of range.
  static absl::StatusOr<PromptLookup> Create(const PromptLookupOptions& options);

  // Appends committed tokens to the context (any int32 values).
  void Append(absl::Span<const int32_t> tokens);

  // Up to `k` proposed next tokens (empty when k <= 0 or nothing matches).
  std::vector<int32_t> Propose(int k) const;

  size_t size() const { return context_.size(); }
  const std::vector<int32_t>& context() const { return context_; }
  const PromptLookupOptions& options() const { return options_; }

 private:
  explicit PromptLookup(const PromptLookupOptions& options);

  // Key bytes of the n-gram of `n` tokens starting at `start` (native byte order).
  absl::string_view KeyAt(size_t start, int n) const;

  PromptLookupOptions options_;
  std::vector<int32_t> context_;
  // index_[n - min_ngram]: n-gram bytes -> latest start position among n-grams that
  // end before the last token (so a lookup never finds the suffix itself).
  std::vector<absl::flat_hash_map<std::string, size_t>> index_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROMPT_LOOKUP_H_
