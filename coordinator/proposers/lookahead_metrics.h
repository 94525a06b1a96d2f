// Lookahead's Prometheus series (issue 19, item 6), registered on the coordinator's
// registry (CoordinatorMetrics::registry()):
//  * tandem_lookahead_lookups_total{result="hit"|"miss"}: steps whose last committed token
//    had at least one guess in the pool (hit) or none (the step verifies the window only);
//  * tandem_lookahead_pool_ngrams: the sequence's pool size (n-grams) at each step;
//  * tandem_lookahead_accepted_length: guess tokens accepted per step that verified
//    guesses (0..N-1; the committed tokens are this + 1);
//  * tandem_lookahead_window_width, tandem_lookahead_guesses: the window columns and
//    guesses the sizing chose (spec/lookahead_sizing.h) per step that could use
//    Lookahead (0 and 0: plain decoding).
// Thread-safe (Prometheus series are).
#ifndef TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_METRICS_H_
#define TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_METRICS_H_

#include <memory>

#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tandem::coordinator {

class LookaheadMetrics {
 public:
  // Registers the series on `registry` (kept alive by this).
  explicit LookaheadMetrics(std::shared_ptr<prometheus::Registry> registry);

  // One step composed for a sequence: whether its key had guesses, its pool's size.
  void RecordLookup(bool hit, int pool_ngrams);
  // A verified step that carried guesses accepted `accepted` of them (path length).
  void RecordAccepted(int accepted);
  // The shape chosen for one step: window columns and guesses (both 0: plain).
  void RecordShape(int window, int guesses);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Counter* hits_;
  prometheus::Counter* misses_;
  prometheus::Histogram* pool_ngrams_;
  prometheus::Histogram* accepted_length_;
  prometheus::Histogram* window_width_;
  prometheus::Histogram* guesses_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_METRICS_H_
