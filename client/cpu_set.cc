#include "client/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tandem::client {

absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  std::set<int> cpus;
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  if (trimmed.empty()) return std::vector<int>();
  for (absl::string_view part : absl::StrSplit(trimmed, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo) || (ends.size() == 2 && !absl::SimpleAtoi(ends[1], &hi))) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad CPU list '", text, "': '", part, "' is not N or N-M"));
    }
    if (ends.size() == 1) hi = lo;
    if (lo < 0 || hi < lo || hi > 4095) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad CPU list '", text, "': range '", part, "' is empty or out of 0..4095"));
    }
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    absl::StrAppend(&out, cpus[i]);
    if (j > i) absl::StrAppend(&out, "-", cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

absl::StatusOr<AffinityPlan> PlanAffinityFrom(const std::vector<int>& draft,
                                              const std::vector<int>& target, int tp) {
  if (tp < 1) return absl::InvalidArgumentError(absl::StrCat("tp must be >= 1, got ", tp));
  if (draft.empty() || target.empty()) {
    return absl::InvalidArgumentError(
        "CPU affinity needs at least one core for the draft "
        "and one for the target group");
  }
  for (int c : draft) {
    if (std::find(target.begin(), target.end(), c) != target.end()) {
      return absl::InvalidArgumentError(absl::StrCat("CPU ", c, " is in both the draft (",
                                                     FormatCpuList(draft), ") and the target (",
                                                     FormatCpuList(target), ") core lists"));
    }
  }
  AffinityPlan plan;
  plan.draft = draft;
  const int n = static_cast<int>(target.size());
  if (n < tp) {
    plan.target_ranks.assign(tp, target);
    return plan;
  }
  int next = 0;
  for (int r = 0; r < tp; ++r) {
    const int share = n / tp + (r < n % tp ? 1 : 0);
    plan.target_ranks.emplace_back(target.begin() + next, target.begin() + next + share);
    next += share;
  }
  return plan;
}

absl::StatusOr<AffinityPlan> PlanAffinity(const std::vector<int>& cpus, int tp) {
  if (tp < 1) return absl::InvalidArgumentError(absl::StrCat("tp must be >= 1, got ", tp));
  if (cpus.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("--cpu-affinity needs at least 2 cores, this process may use ", cpus.size()));
  }
  const int n = static_cast<int>(cpus.size());
  const int draft_cores = std::max(1, n / (tp + 1));
  std::vector<int> draft(cpus.begin(), cpus.begin() + draft_cores);
  std::vector<int> target(cpus.begin() + draft_cores, cpus.end());
  return PlanAffinityFrom(draft, target, tp);
}

}  // namespace tandem::client
