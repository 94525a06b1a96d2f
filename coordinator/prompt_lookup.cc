#include "coordinator/prompt_lookup.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::coordinator {
namespace {

// The child of `parent` (-1: the root) carrying `token`, or -1.
int FindChild(const PromptLookupTree& tree, int parent, int32_t token) {
  for (int i = parent + 1; i < tree.size(); ++i) {
    if (tree.parents[i] == parent && tree.tokens[i] == token) return i;
  }
  return -1;
}

}  // namespace

bool PromptLookupTree::IsChain() const {
  for (int i = 0; i < size(); ++i) {
    if (parents[i] != i - 1) return false;
  }
  return true;
}

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
  if (options.max_branches < 1 || options.max_branches > PromptLookupOptions::kMaxBranches) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt lookup max_branches=", options.max_branches,
                     " is invalid; need 1 <= max_branches <= ", PromptLookupOptions::kMaxBranches));
  }
  return PromptLookup(options);
}

absl::string_view PromptLookup::KeyAt(size_t start, int n) const {
  return absl::string_view(reinterpret_cast<const char*>(context_.data() + start),
                           static_cast<size_t>(n) * sizeof(int32_t));
}

void PromptLookup::Append(absl::Span<const int32_t> tokens) {
  const size_t kept = static_cast<size_t>(options_.starts_kept());
  for (int32_t token : tokens) {
    context_.push_back(token);
    // The token before the new one is no longer the last: index every n-gram ending
    // there. Starts are appended in order, the oldest dropped beyond `kept`.
    if (context_.size() < 2) continue;
    const size_t end = context_.size() - 1;  // One past the newly indexable n-grams.
    for (int n = options_.min_ngram; n <= options_.max_ngram; ++n) {
      if (end < static_cast<size_t>(n)) break;
      const size_t start = end - n;
      Starts& starts = index_[n - options_.min_ngram][KeyAt(start, n)];
      if (starts.size() == kept) starts.erase(starts.begin());
      starts.push_back(start);
    }
  }
}

const PromptLookup::Starts* PromptLookup::Match(int* n) const {
  for (int m = options_.max_ngram; m >= options_.min_ngram; --m) {
    if (context_.size() < static_cast<size_t>(m) + 1) continue;
    const auto& index = index_[m - options_.min_ngram];
    const auto it = index.find(KeyAt(context_.size() - m, m));
    if (it == index.end()) continue;
    *n = m;
    return &it->second;
  }
  return nullptr;
}

std::vector<int32_t> PromptLookup::Propose(int k) const {
  int n = 0;
  const Starts* starts = k > 0 ? Match(&n) : nullptr;
  if (starts == nullptr) return {};
  const size_t from = starts->back() + n;  // First token after the latest occurrence.
  const size_t to = std::min(context_.size(), from + static_cast<size_t>(k));
  return std::vector<int32_t>(context_.begin() + from, context_.begin() + to);
}

bool PromptLookup::AddContinuation(size_t from, int depth, int max_nodes,
                                   PromptLookupTree* tree) const {
  const size_t to = std::min(context_.size(), from + static_cast<size_t>(depth));
  int parent = -1;
  bool added = false;
  for (size_t pos = from; pos < to; ++pos) {
    // Past the first new node the path is new: nothing to find.
    int node = added ? -1 : FindChild(*tree, parent, context_[pos]);
    if (node < 0) {
      if (tree->size() >= max_nodes) break;
      tree->tokens.push_back(context_[pos]);
      tree->parents.push_back(parent);
      node = tree->size() - 1;
      added = true;
    }
    parent = node;
  }
  return added;
}

PromptLookupTree PromptLookup::ProposeTree(int depth, int max_nodes) const {
  PromptLookupTree tree;
  int n = 0;
  const Starts* starts = depth > 0 && max_nodes > 0 ? Match(&n) : nullptr;
  if (starts == nullptr) return tree;
  int branches = 0;
  for (auto it = starts->rbegin(); it != starts->rend(); ++it) {  // Most recent first.
    if (branches == options_.max_branches || tree.size() == max_nodes) break;
    branches += AddContinuation(*it + n, depth, max_nodes, &tree);
  }
  return tree;
}

}  // namespace tandem::coordinator
