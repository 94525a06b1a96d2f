// Benchmark prompt files.
#ifndef TANDEM_CLIENT_PROMPTS_H_
#define TANDEM_CLIENT_PROMPTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::client {

// Parses prompts, one per line. A line that is a JSON object contributes its "prompt"
// (or "text") string; a JSON string line contributes that string; any other non-empty
// line is taken literally. Blank lines are skipped. No prompt at all is an error.
absl::StatusOr<std::vector<std::string>> ParsePrompts(const std::string& text);

// Reads and parses `path`; errors name the file (and line).
absl::StatusOr<std::vector<std::string>> LoadPrompts(const std::string& path);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_PROMPTS_H_
