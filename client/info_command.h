// `tandem info`: a coordinator's GetModelInfo — the served models, limits and methods,
// the BOS/EOS and stop token ids, and the sampling defaults of unset request fields —
// as text, or with --json as the ModelInfo message in proto JSON. Exit 0 on success, 1
// when the call fails (the gRPC status on stderr), 2 on a usage error.
#ifndef TANDEM_CLIENT_INFO_COMMAND_H_
#define TANDEM_CLIENT_INFO_COMMAND_H_

#include "client/command.h"

namespace tandem::client {

Command InfoCommand();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_INFO_COMMAND_H_
