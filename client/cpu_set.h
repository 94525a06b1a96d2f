// CPU sets in Linux cpulist notation ("0-3,8") and the core plan of `tandem up
// --cpu-affinity`: the draft worker and the target group get disjoint cores.
#ifndef TANDEM_CLIENT_CPU_SET_H_
#define TANDEM_CLIENT_CPU_SET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::client {

// Parses "0-3,8,10-11" into sorted, de-duplicated CPU numbers. Empty text -> empty set.
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

// Formats sorted CPU numbers compactly: {0,1,2,5} -> "0-2,5".
std::string FormatCpuList(const std::vector<int>& cpus);

// CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> AllowedCpus();

struct AffinityPlan {
  std::vector<int> draft;                      // Cores of the draft worker.
  std::vector<std::vector<int>> target_ranks;  // Cores of each target rank.
};

// Splits `cpus` (>= 2 of them) between a draft worker and `tp` target ranks. The draft
// gets about one share in tp + 1 (at least one core), the target group the rest. When
// the target has at least `tp` cores each rank gets its own slice (earlier ranks take
// the remainder); otherwise all ranks share the target cores. Example: 2 cores, tp 4
// -> draft {0}, every rank {1}.
absl::StatusOr<AffinityPlan> PlanAffinity(const std::vector<int>& cpus, int tp);

// Plan from explicit core lists: the draft gets `draft`, the target ranks split
// `target` as above. The lists must be non-empty and disjoint.
absl::StatusOr<AffinityPlan> PlanAffinityFrom(const std::vector<int>& draft,
                                              const std::vector<int>& target, int tp);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_CPU_SET_H_
