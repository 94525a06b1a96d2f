// Lookahead's series: lookups by result, pool size and accepted length, as exposed.
#include "coordinator/proposers/lookahead_metrics.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "prometheus/text_serializer.h"

namespace tandem::coordinator {
namespace {

std::string Expose(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

TEST(LookaheadMetricsTest, CountsLookupsAndObservesSizes) {
  auto registry = std::make_shared<prometheus::Registry>();
  LookaheadMetrics metrics(registry);
  metrics.RecordLookup(true, 40);
  metrics.RecordLookup(true, 100);
  metrics.RecordLookup(false, 3);
  metrics.RecordAccepted(2);
  metrics.RecordShape(4, 2);
  metrics.RecordShape(0, 0);
  const std::string text = Expose(*registry);
  EXPECT_NE(text.find("tandem_lookahead_lookups_total{result=\"hit\"} 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("tandem_lookahead_lookups_total{result=\"miss\"} 1"), std::string::npos);
  EXPECT_NE(text.find("tandem_lookahead_pool_ngrams_sum 143"), std::string::npos);
  EXPECT_NE(text.find("tandem_lookahead_accepted_length_bucket{le=\"1\"} 0"), std::string::npos);
  EXPECT_NE(text.find("tandem_lookahead_accepted_length_bucket{le=\"2\"} 1"), std::string::npos);
  EXPECT_NE(text.find("tandem_lookahead_window_width_sum 4"), std::string::npos);
  EXPECT_NE(text.find("tandem_lookahead_window_width_bucket{le=\"0\"} 1"), std::string::npos);
  EXPECT_NE(text.find("tandem_lookahead_guesses_sum 2"), std::string::npos);
}

}  // namespace
}  // namespace tandem::coordinator
