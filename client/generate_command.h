// `tandem generate`: streams one completion to stdout, its statistics to stderr.
#ifndef TANDEM_CLIENT_GENERATE_COMMAND_H_
#define TANDEM_CLIENT_GENERATE_COMMAND_H_

#include "client/command.h"

namespace tandem::client {

Command GenerateCommand();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_GENERATE_COMMAND_H_
