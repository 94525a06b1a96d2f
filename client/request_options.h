// What a user asks for on the command line, turned into a tandem.v1.GenerateRequest,
// and the names the CLI uses for the API's enums.
#ifndef TANDEM_CLIENT_REQUEST_OPTIONS_H_
#define TANDEM_CLIENT_REQUEST_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::client {

// "auto", "none", "draft", "prompt_lookup", "medusa", "lookahead".
absl::StatusOr<v1::SpeculationMethod> ParseMethod(const std::string& name);
std::string MethodName(v1::SpeculationMethod method);

// "default", "greedy", "rejection", "threshold", "ratio", "position", "typical",
// "coupled".
absl::StatusOr<v1::AcceptanceRule> ParseAcceptanceRule(const std::string& name);
std::string AcceptanceRuleName(v1::AcceptanceRule rule);

// "default", "on", "off".
absl::StatusOr<v1::Pipelining> ParsePipelining(const std::string& name);
std::string PipeliningName(v1::Pipelining pipelining);

// Comma-separated lists of the above ("none,draft"); empty items are errors.
absl::StatusOr<std::vector<v1::SpeculationMethod>> ParseMethodList(const std::string& list);
absl::StatusOr<std::vector<v1::Pipelining>> ParsePipeliningList(const std::string& list);
absl::StatusOr<std::vector<v1::AcceptanceRule>> ParseAcceptanceRuleList(const std::string& list);
// Comma-separated positive integers ("1,2,4").
absl::StatusOr<std::vector<int>> ParsePositiveIntList(const std::string& list);
// Comma-separated draft tree node budgets ("server,0,32"): integers >= 0 (0 = chains) or
// "server" (the request leaves it unset: the server's --draft_tree_nodes), as
// kServerTreeNodes. Errors name the bad item.
inline constexpr int kServerTreeNodes = -1;
absl::StatusOr<std::vector<int>> ParseTreeNodesList(const std::string& list);

struct RequestOptions {
  int max_tokens = 128;  // 1.. (the server checks its own limit)
  // Unset: the server's default, the model's generation_config.json (greedy unless the
  // model samples by default; ModelInfo.default_sampling).
  std::optional<float> temperature;  // 0 = greedy
  std::optional<float> top_p;
  std::optional<int> top_k;  // 0 = no limit
  std::optional<uint64_t> seed;
  v1::SpeculationMethod method = v1::SPECULATION_METHOD_AUTO;
  std::optional<int> k;  // unset = adaptive
  v1::AcceptanceRule accept = v1::ACCEPTANCE_RULE_DEFAULT;
  std::optional<float> alpha, theta_first, theta_last, epsilon, delta;
  std::vector<std::string> stop;
  v1::Pipelining pipelining = v1::PIPELINING_DEFAULT;
  // Lookahead's W, N, G (sent only with method lookahead); unset = the server's.
  std::optional<int> lookahead_window, lookahead_ngram, lookahead_guesses;
  // The dynamic draft tree's node budget (sent only with method draft; 0 = a chain);
  // unset = the server's --draft_tree_nodes.
  std::optional<int> tree_nodes;
  bool ignore_eos = false;
  bool return_token_ids = false;
};

// Parses "W,N,G" (three integers; the server checks their ranges) into `o`'s lookahead
// fields; INVALID_ARGUMENT naming --lookahead otherwise. Empty: leaves them unset.
absl::Status ParseLookahead(const std::string& text, RequestOptions* o);

// Builds the request for `prompt`. Rejects what is wrong whatever the server's limits
// (empty prompt, max_tokens < 1, negative k / top_k / temperature) with a message that
// names the flag; everything else is left to the server's validation.
absl::StatusOr<v1::GenerateRequest> BuildRequest(const RequestOptions& options,
                                                 const std::string& prompt);

// One-line summary of a finished request's statistics, e.g.
// "method=draft tokens=64 acceptance=71.3% mean_accepted=3.12 tok/s=41.0 ttft=35.2ms
//  tpot=21.7ms steps=21 finish=length", then, when there are any, fallback_steps=N,
// spec_off=reason:steps,... (steps without speculation, by reason) and the controller's
// predicted_speedup. `client_seconds` is the wall time the client saw (for tok/s); <= 0
// uses the server's total time.
std::string FormatStats(const v1::RequestStats& stats, v1::FinishReason finish,
                        double client_seconds);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_REQUEST_OPTIONS_H_
