#include "coordinator/prompt_lookup.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::coordinator {

PromptLookup::PromptLookup() : PromptLookup(PromptLookupOptions{}) {}

PromptLookup::PromptLookup(const PromptLookupOptions& options)
    : options_(options), index_(options.max_ngram - options.min_ngram + 1) {}

absl::StatusOr<PromptLookup> PromptLookup::Create(const PromptLookupOptions& options) {
  if (options.min_ngram < 1 || options.max_ngram < options.min_ngram ||
      options.max_ngram > PromptLookupOptions::kMaxNgram) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt lookup n-gram sizes min_ngram=", options.min_ngram,
        ", max_ngram=", options.max_ngram,
        " are invalid; need 1 <= min_ngram <= max_ngram <= ", PromptLookupOptions::kMaxNgram));
  }
  return PromptLookup(options);
}

absl::string_view PromptLookup::KeyAt(size_t start, int n) const {
  return absl::string_view(reinterpret_cast<const char*>(context_.data() + start),
                           static_cast<size_t>(n) * sizeof(int32_t));
}

void PromptLookup::Append(absl::Span<const int32_t> tokens) {
  for (int32_t token : tokens) {
    context_.push_back(token);
    // The token before the new one is no longer the last: index every n-gram ending
    // there. Later starts overwrite earlier ones, so entries stay the latest.
    if (context_.size() < 2) continue;
    const size_t end = context_.size() - 1;  // One past the newly indexable n-grams.
    for (int n = options_.min_ngram; n <= options_.max_ngram; ++n) {
      if (end < static_cast<size_t>(n)) break;
      const size_t start = end - n;
      index_[n - options_.min_ngram].insert_or_assign(std::string(KeyAt(start, n)), start);
    }
  }
}

std::vector<int32_t> PromptLookup::Propose(int k) const {
  std::vector<int32_t> proposal;
  if (k <= 0) return proposal;
  for (int n = options_.max_ngram; n >= options_.min_ngram; --n) {
    if (context_.size() < static_cast<size_t>(n) + 1) continue;
    const auto& index = index_[n - options_.min_ngram];
    const auto it = index.find(KeyAt(context_.size() - n, n));
    if (it == index.end()) continue;
    const size_t from = it->second + n;  // First token after the earlier occurrence.
    const size_t to = std::min(context_.size(), from + static_cast<size_t>(k));
    proposal.assign(context_.begin() + from, context_.begin() + to);
    return proposal;
  }
  return proposal;
}

}  // namespace tandem::coordinator
