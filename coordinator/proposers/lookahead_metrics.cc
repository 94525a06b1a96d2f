#include "coordinator/proposers/lookahead_metrics.h"

#include <algorithm>
#include <utility>

#include "prometheus/family.h"

namespace tandem::coordinator {

LookaheadMetrics::LookaheadMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)) {
  auto& lookups = prometheus::BuildCounter()
                      .Name("tandem_lookahead_lookups_total")
                      .Help("Lookahead steps whose key had pool guesses (hit) or none (miss).")
                      .Register(*registry_);
  hits_ = &lookups.Add({{"result", "hit"}});
  misses_ = &lookups.Add({{"result", "miss"}});
  pool_ngrams_ =
      &prometheus::BuildHistogram()
           .Name("tandem_lookahead_pool_ngrams")
           .Help("N-grams in the sequence's lookahead pool, per step.")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{0, 16, 64, 256, 1024, 4096, 16384});
  accepted_length_ = &prometheus::BuildHistogram()
                          .Name("tandem_lookahead_accepted_length")
                          .Help("Guess tokens accepted per lookahead step that verified guesses.")
                          .Register(*registry_)
                          .Add({}, prometheus::Histogram::BucketBoundaries{0, 1, 2, 3, 4, 5, 6, 7});
  const prometheus::Histogram::BucketBoundaries sizes{0, 1, 2, 4, 8, 16, 32, 64};
  window_width_ = &prometheus::BuildHistogram()
                       .Name("tandem_lookahead_window_width")
                       .Help("Window columns the lookahead sizing chose per step (0: none).")
                       .Register(*registry_)
                       .Add({}, sizes);
  guesses_ = &prometheus::BuildHistogram()
                  .Name("tandem_lookahead_guesses")
                  .Help("Guesses per step the lookahead sizing chose.")
                  .Register(*registry_)
                  .Add({}, sizes);
}

void LookaheadMetrics::RecordLookup(bool hit, int pool_ngrams) {
  (hit ? hits_ : misses_)->Increment();
  pool_ngrams_->Observe(std::max(0, pool_ngrams));
}

void LookaheadMetrics::RecordAccepted(int accepted) {
  accepted_length_->Observe(std::max(0, accepted));
}

void LookaheadMetrics::RecordShape(int window, int guesses) {
  window_width_->Observe(std::max(0, window));
  guesses_->Observe(std::max(0, guesses));
}

}  // namespace tandem::coordinator
