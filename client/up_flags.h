// The flags of `tandem up` and the cluster description they give.
#ifndef TANDEM_CLIENT_UP_FLAGS_H_
#define TANDEM_CLIENT_UP_FLAGS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "client/cluster_config.h"
#include "client/command.h"

// Flags that steer the run itself rather than describe the cluster.
ABSL_DECLARE_FLAG(std::string, ready_file);
ABSL_DECLARE_FLAG(std::string, coordinator_bin);
ABSL_DECLARE_FLAG(std::string, worker_bin);
ABSL_DECLARE_FLAG(bool, dry_run);

namespace tandem::client {

// The cluster description: the --config file (or defaults) with every flag in
// `specified` (flag names without dashes, underscores) applied on top, validated.
// InvalidArgument (or the config loader's error) with the reason.
absl::StatusOr<ClusterConfig> ConfigFromFlags(const std::set<std::string>& specified);

// `tandem up --help`'s table: every flag above with its value name and description.
std::vector<CommandFlag> UpFlagHelp();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_UP_FLAGS_H_
