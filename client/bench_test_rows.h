// Test helper: bench rows (one configuration of one round) with what the bench_repeats
// and bench_baseline tests read.
#ifndef TANDEM_CLIENT_BENCH_TEST_ROWS_H_
#define TANDEM_CLIENT_BENCH_TEST_ROWS_H_

#include "client/bench_report.h"

namespace tandem::client {

// The row of `method` at `concurrency` in round `round`: 4 requests, all ok, 100
// tokens, `tok_s` tokens per second, pipelining left at the server's default.
inline ConfigResult BenchRow(v1::SpeculationMethod method, int concurrency, int round,
                             double tok_s) {
  ConfigResult r;
  r.key = {method, v1::PIPELINING_DEFAULT, concurrency};
  r.round = round;
  r.requests = 4;
  r.ok = 4;
  r.generated_tokens = 100;
  r.throughput_tok_s = tok_s;
  return r;
}

// The A/A control's row (plain decoding, never a baseline) at `concurrency` in `round`.
inline ConfigResult ControlRow(int concurrency, int round, double tok_s) {
  ConfigResult r = BenchRow(v1::SPECULATION_METHOD_NONE, concurrency, round, tok_s);
  r.key.aa_control = true;
  return r;
}

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_TEST_ROWS_H_
