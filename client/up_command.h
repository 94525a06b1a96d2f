// `tandem up`: a whole Tandem cluster (coordinator, draft worker, target group) as
// local processes on loopback.
#ifndef TANDEM_CLIENT_UP_COMMAND_H_
#define TANDEM_CLIENT_UP_COMMAND_H_

#include <set>

#include "absl/status/statusor.h"
#include "client/cluster_config.h"
#include "client/command.h"

namespace tandem::client {

Command UpCommand();

// The cluster description: the --config file (or defaults) with every flag in
// `specified` applied on top.
absl::StatusOr<ClusterConfig> ConfigFromFlags(const std::set<std::string>& specified);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_UP_COMMAND_H_
