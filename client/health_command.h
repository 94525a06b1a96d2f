// `tandem health`: one grpc.health.v1 check of a Tandem server (coordinator or
// worker), for container health checks (`docker run --health-cmd`, Compose): exit 0
// when it answers SERVING within 5 s, 1 otherwise (the reason on stderr: NOT_SERVING,
// connection refused, ...), 2 on a usage error.
#ifndef TANDEM_CLIENT_HEALTH_COMMAND_H_
#define TANDEM_CLIENT_HEALTH_COMMAND_H_

#include "client/command.h"

namespace tandem::client {

Command HealthCommand();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_HEALTH_COMMAND_H_
