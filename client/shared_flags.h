// Flags used by more than one `tandem` subcommand (absl flags are global to the
// binary, so each is defined once, here).
#ifndef TANDEM_CLIENT_SHARED_FLAGS_H_
#define TANDEM_CLIENT_SHARED_FLAGS_H_

#include <optional>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, server);
ABSL_DECLARE_FLAG(int, max_tokens);
ABSL_DECLARE_FLAG(std::optional<double>, temperature);
ABSL_DECLARE_FLAG(std::optional<int>, k);
ABSL_DECLARE_FLAG(std::string, pipelining);
ABSL_DECLARE_FLAG(bool, ignore_eos);
ABSL_DECLARE_FLAG(double, timeout);
ABSL_DECLARE_FLAG(std::optional<uint64_t>, seed);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(std::string, format);

#endif  // TANDEM_CLIENT_SHARED_FLAGS_H_
