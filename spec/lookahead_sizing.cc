#include "spec/lookahead_sizing.h"

#include <algorithm>

namespace tandem {
namespace spec {
namespace {

// {1, 2, 4, ...} below `cap`, then `cap` (with 0 first when `with_zero`); {cap} when
// `fixed`.
std::vector<int> Sizes(int cap, bool fixed, bool with_zero) {
  if (fixed) return {cap};
  std::vector<int> sizes;
  if (with_zero) sizes.push_back(0);
  for (int s = 1; s < cap; s *= 2) sizes.push_back(s);
  if (cap > 0) sizes.push_back(cap);
  return sizes;
}

}  // namespace

LookaheadSizer::LookaheadSizer(const LookaheadSizingConfig& config) : config_(config) {
  config_.max_window = std::max(1, config_.max_window);
  config_.max_guesses = std::max(0, config_.max_guesses);
  config_.ngram = std::max(2, config_.ngram);
  config_.forgetting = std::clamp(config_.forgetting, 1e-6, 1.0);
  config_.switch_margin = std::max(0.0, config_.switch_margin);
  if (!(config_.fixed_window && config_.fixed_guesses)) shapes_.push_back({0, 0});
  for (int w : Sizes(config_.max_window, config_.fixed_window, /*with_zero=*/true)) {
    for (int g : Sizes(config_.max_guesses, config_.fixed_guesses, /*with_zero=*/false)) {
      if (w > 0 || g > 0) shapes_.push_back({w, g});
    }
  }
  if (config_.max_guesses == 0 && !config_.fixed_guesses) {
    for (int w : Sizes(config_.max_window, config_.fixed_window, false)) shapes_.push_back({w, 0});
  }
  accepted_sum_.assign(shapes_.size(), 0.0);
  weight_.assign(shapes_.size(), 0.0);
  incumbent_ = {config_.max_window, config_.max_guesses};
}

void LookaheadSizer::Observe(const std::vector<GuessOutcome>& guesses, int live_window) {
  ++observations_;
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const LookaheadShape& shape = shapes_[i];
    if (shape.window > live_window) continue;  // Its columns made no n-grams: keep.
    int best = 0, seen = 0;
    for (const GuessOutcome& g : guesses) {
      if (seen >= shape.guesses) break;
      if (g.source >= shape.window) continue;  // Not in a pool fed by `shape.window` columns.
      ++seen;
      best = std::max(best, std::clamp(g.matched, 0, config_.ngram - 1));
    }
    accepted_sum_[i] = config_.forgetting * accepted_sum_[i] + best;
    weight_[i] = config_.forgetting * weight_[i] + 1.0;
  }
}

double LookaheadSizer::ExpectedAccepted(const LookaheadShape& shape) const {
  for (size_t i = 0; i < shapes_.size(); ++i) {
    if (shapes_[i] == shape) return weight_[i] > 0 ? accepted_sum_[i] / weight_[i] : 0.0;
  }
  return 0.0;
}

int LookaheadSizer::Positions(const LookaheadShape& shape) const {
  return (shape.window + shape.guesses) * (config_.ngram - 1);
}

double LookaheadSizer::Rate(int shape, const VerifyCostFn& verify_cost) const {
  const LookaheadShape& s = shapes_[shape];
  if (s.window == 0 && s.guesses == 0) return 1.0;
  const double nu = verify_cost ? verify_cost(Positions(s)) : 1.0;
  const double mean = weight_[shape] > 0 ? accepted_sum_[shape] / weight_[shape] : 0.0;
  return (1.0 + mean) / std::max(nu, 1e-9);
}

LookaheadSizingChoice LookaheadSizer::Choose(const VerifyCostFn& verify_cost) {
  int best = -1, incumbent = -1;
  for (int i = 0; i < static_cast<int>(shapes_.size()); ++i) {
    if (shapes_[i] == incumbent_) incumbent = i;
    if (best < 0) {
      best = i;
      continue;
    }
    const double rate = Rate(i, verify_cost), best_rate = Rate(best, verify_cost);
    if (rate > best_rate ||
        (rate == best_rate && Positions(shapes_[i]) < Positions(shapes_[best]))) {
      best = i;
    }
  }
  if (observations_ >= config_.min_observations && best >= 0) {
    const bool keep =
        incumbent >= 0 &&
        Rate(incumbent, verify_cost) * (1.0 + config_.switch_margin) >= Rate(best, verify_cost);
    if (!keep) incumbent = best;
  }
  if (incumbent < 0) return {incumbent_, 1.0};
  incumbent_ = shapes_[incumbent];
  return {incumbent_, Rate(incumbent, verify_cost)};
}

}  // namespace spec
}  // namespace tandem
