// How many tokens a phase may feed a draft that is catching up (PlanPhase's draft
// prefill budget; docs/architecture.md §3, "Catching up").
#ifndef TANDEM_COORDINATOR_DRAFT_FEED_BUDGET_H_
#define TANDEM_COORDINATOR_DRAFT_FEED_BUDGET_H_

#include "coordinator/phase_plan.h"

namespace tandem::coordinator {

// Draft prefill tokens the phase `plan` (its target work already planned) may carry,
// with `running` sequences in the batch. The phase ends when both workers are done, so
// at a batch of more than one a catch-up feed longer than the target's step stalls
// every sequence to feed one: it is cut to what one plain target step hides, n / the
// batch-priced feed cost (WorkerAvailability::draft_worker_feed_cost, per-token time
// x n / T), at least 16 tokens; the rest is fed over the next phases while the
// sequence decodes plain. Alone, without target work, or with the feed cost not yet
// measured (0), the feed is not cut: o.draft_max_batch_tokens. Never more than that.
int HiddenDraftFeedTokens(const PhasePlan& plan, int running, const PlannerOptions& o,
                          const WorkerAvailability& workers);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_DRAFT_FEED_BUDGET_H_
