// Running the load of `tandem bench`: the settings every request is built from, one
// configuration's run with its progress bar, the server check, the warm-up, and the
// tool's notices.
#ifndef TANDEM_CLIENT_BENCH_RUN_H_
#define TANDEM_CLIENT_BENCH_RUN_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/bench_report.h"
#include "client/bench_schedule.h"
#include "client/request_options.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {

struct BenchSettings {
  std::vector<std::string> prompts;  // Non-empty.
  RequestOptions request;            // Checked with BuildRequest beforehand.
  absl::Duration timeout;            // Deadline of each request.
  std::optional<uint64_t> seed;      // Requests for prompt i carry seed + i.
};

// "tandem bench: <line>" on stderr.
void BenchSay(const std::string& line);
// `t` as ISO 8601 UTC, e.g. "2026-01-31T12:00:00Z".
std::string IsoTime(absl::Time t);

// Request number `number` of configuration `key`: prompt number % prompts (stored in
// *prompt_index), the key's method, pipelining and rule, seed + prompt index when
// seeded, no fixed K for `none`.
v1::GenerateRequest MakeBenchRequest(const BenchSettings& s, const ConfigKey& key, int number,
                                     int* prompt_index);

// Runs `requests` requests of `key` at its concurrency with a progress bar on stderr;
// stops early when *interrupted turns true (the run then holds what finished). The
// requests are numbers first_number.. (prompt and seed follow the number; a chunk of a
// round starts past the chunks before it).
ConfigRun RunConfig(v1::Tandem::Stub* stub, const BenchSettings& s, const ConfigKey& key,
                    int requests, std::atomic<bool>* interrupted, int first_number = 0);

// Adds `part` (another chunk of the same configuration and round) to *run: its requests
// and prompt indices appended, its wall time added (the chunks' wall times, not the
// span from the first chunk's start to the last one's end, which holds other runs).
void AppendRun(ConfigRun&& part, ConfigRun* run);

// Asks the server `server` (its address, for messages) for its model info, into
// *info, and checks it offers every method of `methods`. Returns the exit status on
// failure, said with BenchSay (1 unreachable within 10 s, 2 a method it does not
// offer), 0 when fine.
int CheckServer(v1::Tandem::Stub* stub, const std::string& server,
                const std::vector<v1::SpeculationMethod>& methods, v1::ModelInfo* info);

// `requests` unmeasured `none` requests, one at a time (no-op for <= 0).
void Warmup(v1::Tandem::Stub* stub, const BenchSettings& s, int requests,
            std::atomic<bool>* interrupted);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_RUN_H_
