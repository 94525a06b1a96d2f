// `tandem up`: a whole Tandem cluster (coordinator, draft worker, target group) as
// local processes on loopback.
#ifndef TANDEM_CLIENT_UP_COMMAND_H_
#define TANDEM_CLIENT_UP_COMMAND_H_

#include "client/command.h"

namespace tandem::client {

// The `up` subcommand: flags (up_flags.h), help text and its entry point.
Command UpCommand();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_UP_COMMAND_H_
