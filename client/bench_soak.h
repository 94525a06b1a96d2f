// `tandem bench --soak`: one configuration at constant concurrency for a duration, with
// the resident memory of the server processes sampled along the way.
#ifndef TANDEM_CLIENT_BENCH_SOAK_H_
#define TANDEM_CLIENT_BENCH_SOAK_H_

#include <sys/types.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "client/bench_report.h"
#include "client/bench_run.h"
#include "client/machine_info.h"

namespace tandem::client {

// Resident set sizes of processes over a soak: at the start (the construction), the
// end (the last Sample) and the peak of the samples taken, in KiB; -1 where a process
// could not be read.
class RssTracker {
 public:
  explicit RssTracker(std::vector<pid_t> pids) : pids_(std::move(pids)) { Sample(true); }

  void Sample(bool first = false) {
    for (pid_t pid : pids_) {
      std::optional<long> kib = ResidentKib(pid);
      Rss& r = rss_[pid];
      if (!kib.has_value()) continue;
      if (first) r.start = *kib;
      r.end = *kib;
      r.max = std::max(r.max, *kib);
    }
  }

  // Prints one line per process and returns {pid: {start_kib, end_kib, max_kib}}.
  nlohmann::json PrintAndJson() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [pid, r] : rss_) {
      std::printf("  pid %d RSS: start %ld KiB, end %ld KiB, max %ld KiB\n", pid, r.start, r.end,
                  r.max);
      j[absl::StrCat(pid)] = {{"start_kib", r.start}, {"end_kib", r.end}, {"max_kib", r.max}};
    }
    return j;
  }

 private:
  struct Rss {
    long start = -1, end = -1, max = -1;
  };
  std::vector<pid_t> pids_;
  std::map<pid_t, Rss> rss_;
};

// Prints the soak summary of `row` (measured from `start` to `end`) and the RSS lines,
// and returns its JSON record.
nlohmann::json ReportSoak(const ConfigResult& row, absl::Time start, absl::Time end,
                          const RssTracker& rss, bool interrupted);

struct SoakResult {
  nlohmann::json report;  // ReportSoak's record.
  bool ok = false;        // At least one request succeeded.
};

// Runs `key` for `duration` (or until *interrupted), sampling the RSS of `pids` every 5 s.
SoakResult RunSoak(v1::Tandem::Stub* stub, const BenchSettings& s, const ConfigKey& key,
                   absl::Duration duration, const std::vector<pid_t>& pids,
                   std::atomic<bool>* interrupted);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_SOAK_H_
