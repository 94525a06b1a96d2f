#include "coordinator/draft_feed_budget.h"

#include <algorithm>
#include <cmath>

namespace tandem::coordinator {

int HiddenDraftFeedTokens(const PhasePlan& plan, int running, const PlannerOptions& o,
                          const WorkerAvailability& workers) {
  constexpr int kMinHiddenFeedTokens = 16;
  const bool target_work =
      plan.verify.sequences_size() > 0 || plan.target_prefill.sequences_size() > 0;
  const double feed_cost = workers.draft_worker_feed_cost;
  if (running <= 1 || !target_work || !(feed_cost > 0) || !std::isfinite(feed_cost)) {
    return o.draft_max_batch_tokens;
  }
  const double hidden = running / feed_cost;
  if (hidden >= o.draft_max_batch_tokens) return o.draft_max_batch_tokens;
  return std::min(o.draft_max_batch_tokens,
                  std::max(kMinHiddenFeedTokens, static_cast<int>(hidden)));
}

}  // namespace tandem::coordinator
