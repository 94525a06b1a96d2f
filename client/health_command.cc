#include "client/health_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "client/health.h"
#include "client/shared_flags.h"

namespace tandem::client {
namespace {

// Short enough for a container probe's own timeout (Docker's default: 30 s).
constexpr absl::Duration kCheckDeadline = absl::Seconds(5);

int RunHealth(const Invocation& inv) {
  if (!inv.positional.empty()) {
    std::fprintf(stderr, "tandem health: takes no arguments (give the address as --server)\n");
    return 2;
  }
  const std::string address = absl::GetFlag(FLAGS_server);
  if (absl::Status s = CheckServing(address, kCheckDeadline); !s.ok()) {
    std::fprintf(stderr, "tandem health: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::printf("%s: SERVING\n", address.c_str());
  return 0;
}

}  // namespace

Command HealthCommand() {
  Command c;
  c.name = "health";
  c.summary = "Check that a coordinator or worker answers SERVING (container health checks).";
  c.usage =
      "Usage: tandem health [--server=HOST:PORT]\n\n"
      "One grpc.health.v1 check of the server (service \"\"), with a 5 s deadline. Exit 0\n"
      "when it answers SERVING, 1 otherwise (the reason on stderr). A coordinator is\n"
      "SERVING once its workers are up; a target rank once its group has formed. In a\n"
      "container: docker run --health-cmd 'tandem health --server 127.0.0.1:50051' ...";
  c.flags = {{"server", "HOST:PORT", "Server to check: a coordinator or a worker."}};
  c.run = RunHealth;
  return c;
}

}  // namespace tandem::client
