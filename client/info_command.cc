#include "client/info_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/model_info_text.h"
#include "client/server_channel.h"
#include "client/shared_flags.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::client {
namespace {

int RunInfo(const Invocation& inv) {
  if (!inv.positional.empty()) {
    std::fprintf(stderr, "tandem info: takes no arguments (give the address as --server)\n");
    return 2;
  }
  const std::string server = absl::GetFlag(FLAGS_server);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ServerChannel(server);
  if (!channel.ok()) {
    std::fprintf(stderr, "tandem info: %s\n", std::string(channel.status().message()).c_str());
    return 2;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout))));
  v1::ModelInfo info;
  const grpc::Status status =
      v1::Tandem::NewStub(*channel)->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
  if (!status.ok()) {
    std::fprintf(
        stderr, "tandem info: %s: %s\n",
        absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())).c_str(),
        status.error_message().c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::printf("%s\n", ModelInfoJson(info).c_str());
  } else {
    std::fputs(ModelInfoText(info).c_str(), stdout);
  }
  return 0;
}

}  // namespace

Command InfoCommand() {
  Command c;
  c.name = "info";
  c.summary = "Show a server's models, limits, stop token ids and sampling defaults.";
  c.usage =
      "Usage: tandem info [--server=HOST:PORT] [--json]\n\n"
      "Asks the coordinator for its GetModelInfo: the target and draft models, the\n"
      "context and request limits, the speculation methods served, the BOS and EOS ids\n"
      "and every id generation stops at (the model's generation_config.json list), and\n"
      "what a request's unset temperature, top_p and top_k resolve to (the model's\n"
      "generation_config.json defaults; greedy unless the model samples by default).";
  c.flags = {{"server", "HOST:PORT", "Coordinator address."},
             {"json", "", "Print the tandem.v1.ModelInfo message as one JSON object."},
             {"timeout", "S", "Deadline of the call, seconds."}};
  for (const CommandFlag& f : ConnectionFlags()) c.flags.push_back(f);
  c.run = RunInfo;
  return c;
}

}  // namespace tandem::client
