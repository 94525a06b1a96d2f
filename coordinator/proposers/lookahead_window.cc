#include "coordinator/proposers/lookahead_window.h"

#include <algorithm>
#include <utility>

namespace tandem::coordinator {

int LookaheadMaxNodes(const LookaheadConfig& config) {
  return (config.window + config.max_guesses) * (config.ngram - 1);
}

NgramPool::NgramPool(int length, int max_per_key)
    : length_(std::max(2, length)), max_per_key_(std::max(0, max_per_key)) {}

void NgramPool::Add(absl::Span<const int32_t> ngram, int source) {
  if (static_cast<int>(ngram.size()) != length_ || max_per_key_ == 0) return;
  std::deque<Entry>& kept = by_key_[ngram[0]];
  const absl::Span<const int32_t> continuation = ngram.subspan(1);
  auto it = std::find_if(kept.begin(), kept.end(), [&](const Entry& e) {
    return absl::Span<const int32_t>(e.continuation) == continuation;
  });
  if (it != kept.end()) {
    Entry found = std::move(*it);
    found.source = std::min(found.source, source);
    kept.erase(it);
    kept.push_front(std::move(found));
    return;
  }
  kept.push_front({std::vector<int32_t>(continuation.begin(), continuation.end()), source});
  ++size_;
  if (static_cast<int>(kept.size()) > max_per_key_) {
    kept.pop_back();
    --size_;
  }
}

void NgramPool::AddAll(absl::Span<const int32_t> tokens) {
  for (size_t i = 0; i + length_ <= tokens.size(); ++i) Add(tokens.subspan(i, length_));
}

std::vector<std::vector<int32_t>> NgramPool::Find(int32_t key) const {
  std::vector<std::vector<int32_t>> out;
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {
    for (const Entry& e : it->second) out.push_back(e.continuation);
  }
  return out;
}

std::vector<int> NgramPool::Sources(int32_t key) const {
  std::vector<int> out;
  auto it = by_key_.find(key);
  if (it != by_key_.end()) {
    for (const Entry& e : it->second) out.push_back(e.source);
  }
  return out;
}

JacobiWindow::JacobiWindow(int window, int levels, absl::Span<const int32_t> context)
    : window_(std::max(1, window)), max_levels_(std::max(1, levels)) {
  std::vector<int32_t> first(window_, 0);
  const int n = static_cast<int>(context.size());
  if (n > 0) {
    const int start = std::max(0, n - window_);
    for (int j = 0; j < window_; ++j) first[j] = context[start + j % (n - start)];
  }
  levels_.push_back(std::move(first));
}

bool JacobiWindow::Advance(absl::Span<const int32_t> next,
                           std::vector<std::vector<int32_t>>* ngrams) {
  if (static_cast<int>(next.size()) != window_) return false;
  if (filled() == max_levels_) {
    for (int j = 0; j < window_; ++j) {
      std::vector<int32_t>& ngram = ngrams->emplace_back();
      for (const std::vector<int32_t>& level : levels_) ngram.push_back(level[j]);
      ngram.push_back(next[j]);
    }
    levels_.erase(levels_.begin());
  }
  levels_.emplace_back(next.begin(), next.end());
  return true;
}

void JacobiWindow::Resize(int width) {
  width = std::max(1, width);
  for (std::vector<int32_t>& level : levels_) {
    const int old = static_cast<int>(level.size());
    level.resize(width);
    for (int j = old; j < width; ++j) level[j] = level[j % old];
  }
  window_ = width;
}

namespace {

// The child of `parent` (-1: the root) carrying `token` in the trie, or -1.
int FindChild(const LookaheadStep& step, int parent, int32_t token) {
  for (int i = 0; i < static_cast<int>(step.tokens.size()); ++i) {
    if (step.parents[i] == parent && step.tokens[i] == token) return i;
  }
  return -1;
}

// Merges `path` under the root of the trie (tokens, parents): shared prefixes once.
void AddPath(const std::vector<int32_t>& path, LookaheadStep* step) {
  int parent = -1;
  for (int32_t token : path) {
    int found = FindChild(*step, parent, token);
    if (found < 0) {
      found = static_cast<int>(step->tokens.size());
      step->tokens.push_back(token);
      step->parents.push_back(parent);
    }
    parent = found;
  }
}

// Nodes `path` adds to the trie.
int NewNodes(const std::vector<int32_t>& path, const LookaheadStep& step) {
  int parent = -1, depth = 0;
  for (; depth < static_cast<int>(path.size()); ++depth) {
    parent = FindChild(step, parent, path[depth]);
    if (parent < 0) break;
  }
  return static_cast<int>(path.size()) - depth;
}

}  // namespace

LookaheadStep BuildLookaheadStep(const NgramPool& pool, const JacobiWindow& window, int32_t last,
                                 int max_guesses, int max_nodes, bool with_window) {
  LookaheadStep step;
  const int window_nodes = with_window ? window.window() * window.filled() : 0;
  const int budget = max_nodes >= window_nodes ? max_nodes - window_nodes : max_nodes;
  std::vector<std::vector<int32_t>> guesses = pool.Find(last);
  if (static_cast<int>(guesses.size()) > max_guesses) guesses.resize(std::max(0, max_guesses));
  for (std::vector<int32_t>& g : guesses) {
    const int left = budget - static_cast<int>(step.tokens.size());
    if (left <= 0) break;
    const int extra = NewNodes(g, step);
    if (extra > left) g.resize(g.size() - (extra - left));  // A prefix still guesses.
    AddPath(g, &step);
  }
  step.acceptable = static_cast<int>(step.tokens.size());
  if (!with_window || max_nodes < window_nodes) return step;
  const int base = step.acceptable, w = window.window();
  for (int l = 0; l < window.filled(); ++l) {
    for (int j = 0; j < w; ++j) {
      step.tokens.push_back(window.levels()[l][j]);
      if (l > 0) {
        step.parents.push_back(base + (l - 1) * w + j);
      } else {
        step.parents.push_back(j == 0 ? -1 : base + j - 1);
      }
    }
  }
  return step;
}

}  // namespace tandem::coordinator
