// Cost-aware sizing of Lookahead steps (issue 19, item 5; docs/architecture.md §5,
// "Lookahead: sizing"). Pure and deterministic; no I/O. One sizer per sequence.
//
// A step of window width w and g guesses (n-grams of length N) computes
// P(w, g) = (w + g) (N - 1) positions besides the one a plain step computes, so it costs
// nu(P) plain steps (spec/cost_model.h: nu(K) = T(verify of K + 1 positions) / T(plain
// step), the engine's measured fit), and commits 1 + B(w, g) tokens in expectation, B
// the longest accepted prefix among its guesses. The sizer keeps, for each shape of a
// small grid, a discounted mean of B measured counterfactually on every step: the
// coordinator knows the guesses the pool held for the step's key, where each came from
// (the prompt or committed tokens, or window column j), and later the tokens the target
// committed; under greedy decoding a guess's match with those tokens is exactly what
// verification accepts of it. A shape (w, g) sees the first g guesses (pool order, most
// recent first) among those that exist with a window of w columns (source < w: column j
// of a window only exists when w > j; prompt and committed n-grams always). It then
// picks the shape with the largest rate R(w, g) = (1 + B(w, g)) / nu(P(w, g)), the
// expected tokens per plain step's time: the window's columns earn their rows only
// through the guesses they feed, and each guess rank earns its rows by its measured
// acceptance, so W and G shrink where nu is steep and grow where it is flat. Plain
// decoding ((0, 0), R = 1) wins when no shape beats it.
// Hysteresis: the incumbent shape is kept unless another beats its rate by
// switch_margin (relative), so a rate near a boundary does not flip the shape step by
// step. Shapes wider than the window that ran are not measured (their columns made no
// n-grams): they keep their last estimate.
#ifndef TANDEM_SPEC_LOOKAHEAD_SIZING_H_
#define TANDEM_SPEC_LOOKAHEAD_SIZING_H_

#include <vector>

#include "spec/cost_model.h"

namespace tandem {
namespace spec {

// One step's shape: window columns and guesses verified; (0, 0) = plain decoding.
struct LookaheadShape {
  int window = 0;
  int guesses = 0;
  bool operator==(const LookaheadShape& o) const {
    return window == o.window && guesses == o.guesses;
  }
};

struct LookaheadSizingConfig {
  int max_window = 2;   // W cap, >= 1.
  int max_guesses = 2;  // G cap, >= 0.
  int ngram = 3;        // N >= 2.
  // Honour the caps exactly (the client set them): only that value is a candidate.
  bool fixed_window = false;
  bool fixed_guesses = false;
  double forgetting = 0.95;     // (0, 1]: weight the past keeps per observed step.
  double switch_margin = 0.05;  // >= 0: relative gain needed to change the shape.
  int min_observations = 4;     // Steps observed before the caps are left.
};

// A guess the pool held for a step's key: where its n-gram came from (-1: the prompt or
// committed tokens, else the window column that completed it) and how many of its
// tokens matched the tokens committed after the key.
struct GuessOutcome {
  int source = -1;
  int matched = 0;
};

struct LookaheadSizingChoice {
  LookaheadShape shape;
  double rate = 1.0;  // Modelled R of `shape` (1 for plain decoding).
};

class LookaheadSizer {
 public:
  // Values outside the ranges above are clamped.
  explicit LookaheadSizer(const LookaheadSizingConfig& config);

  // The grid: widths {0, 1, 2, 4, ...} up to and including max_window, guesses
  // {1, 2, 4, ...} up to and including max_guesses, plus (0, 0); only the caps where
  // fixed (and no (0, 0) when both are).
  const std::vector<LookaheadShape>& shapes() const { return shapes_; }

  // One step's guesses, in pool order (at most max_guesses are read), observed while
  // the window ran `live_window` columns (0: none): updates every shape of width
  // <= live_window.
  void Observe(const std::vector<GuessOutcome>& guesses, int live_window);

  // Discounted mean of B for `shape` (0 before any observation of it).
  double ExpectedAccepted(const LookaheadShape& shape) const;

  // The shape for the next step under `verify_cost` (empty: nu = 1) and makes it the
  // incumbent: the caps until min_observations steps are in, then the best rate with
  // hysteresis (ties to fewer positions).
  LookaheadSizingChoice Choose(const VerifyCostFn& verify_cost);
  const LookaheadShape& incumbent() const { return incumbent_; }

 private:
  double Rate(int shape, const VerifyCostFn& verify_cost) const;
  int Positions(const LookaheadShape& shape) const;

  LookaheadSizingConfig config_;
  std::vector<LookaheadShape> shapes_;
  std::vector<double> accepted_sum_, weight_;  // Per shape: discounted sums of B, steps.
  int observations_ = 0;
  LookaheadShape incumbent_;
};

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_LOOKAHEAD_SIZING_H_
