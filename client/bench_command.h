// `tandem bench`: throughput/latency benchmark of a running server over methods,
// pipelining modes and concurrency levels, or a constant-load soak.
#ifndef TANDEM_CLIENT_BENCH_COMMAND_H_
#define TANDEM_CLIENT_BENCH_COMMAND_H_

#include "client/command.h"

namespace tandem::client {

Command BenchCommand();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_BENCH_COMMAND_H_
