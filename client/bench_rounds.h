// The measuring loop of `tandem bench`: every configuration in interleaved rounds
// (client/bench_schedule.h), each run's requests in chunks, with the coordinator's
// metrics scraped around every chunk, merged into one row per configuration and round.
#ifndef TANDEM_CLIENT_BENCH_ROUNDS_H_
#define TANDEM_CLIENT_BENCH_ROUNDS_H_

#include <atomic>
#include <string>
#include <vector>

#include "client/bench_repeats.h"
#include "client/bench_report.h"
#include "client/bench_run.h"
#include "client/bench_schedule.h"
#include "client/prometheus_text.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {

struct RoundsSpec {
  int repeat = 1;       // Rounds (>= 1).
  int requests = 8;     // Requests per configuration and round (>= 1).
  int chunks = 1;       // Chunks each configuration's requests of a round are split into.
  std::string metrics;  // Coordinator's Prometheus HOST:PORT; empty = no cost terms.
};

// The samples of http://address/metrics; empty for an empty address or on any failure
// (said once with BenchSay).
std::vector<PrometheusSample> ScrapeMetrics(const std::string& address);

// Runs `configs` on `stub` for spec.repeat interleaved rounds of spec.chunks chunks,
// appends every configuration's run of each round (its chunks together, for the output
// check) to *runs, and returns one result per configuration over the rounds, with
// speedups and cost terms taken within each round; configurations an interrupt left
// unmeasured are left out. With `baseline` (nullptr = none), each round ends with
// `none` at every concurrency level of `configs` on that server, appended to
// *baseline_rows. Stops between chunks once *interrupted is true.
std::vector<RepeatedResult> RunRounds(v1::Tandem::Stub* stub, const BenchSettings& s,
                                      const std::vector<ConfigKey>& configs, const RoundsSpec& spec,
                                      std::atomic<bool>* interrupted, std::vector<ConfigRun>* runs,
                                      v1::Tandem::Stub* baseline,
                                      std::vector<ConfigResult>* baseline_rows);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_ROUNDS_H_
