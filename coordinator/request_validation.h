// Validation of public GenerateRequests and resolution of their defaults.
//
// ValidateRequest checks every field of a tandem.v1.GenerateRequest against the ranges
// documented in tandem.proto and the server's limits, and returns the request with all
// defaults resolved (what the engine runs). Every rejection is INVALID_ARGUMENT with a
// message that names the field and its valid range, except a speculation method that
// this server does not enable (FAILED_PRECONDITION, see below).
//
// Decisions on cases the protocol leaves open:
//  * Method MEDUSA / LOOKAHEAD / DRAFT not in ServerLimits::available_methods:
//    FAILED_PRECONDITION ("... is not enabled on this server"): the request is well
//    formed, this server's configuration cannot serve it (ModelInfo.methods lists what
//    it can). AUTO and NONE are always accepted.
//  * Unknown enum numbers (proto3 enums are open) for method or rule: INVALID_ARGUMENT.
//  * Unset sampling fields take the model's defaults (coordinator/request_sampling.h);
//    the acceptance rule and its checks see the resolved temperature.
//  * Rule GREEDY with temperature > 0: INVALID_ARGUMENT (greedy requires temperature 0).
//    Other rules at temperature 0 are kept as asked (they act on one-hot p and q).
//  * A rule parameter given for a rule that does not use it (e.g. alpha with the
//    default rule, theta_first with `threshold`): INVALID_ARGUMENT, so that a client
//    never believes a parameter took effect when it did not.
//  * Method NONE with num_speculative_tokens > 0: INVALID_ARGUMENT (contradictory).
//    num_speculative_tokens = 0 with any method resolves the method to NONE.
//  * Empty request_id: the server assigns "req-" + 16 hex digits (request_id_assigned).
//  * Token-id prompts must leave room for one generated token: at most
//    context_length - 1 ids (tandem.proto says "1 .. context length"; a prompt that
//    fills the context could generate nothing).
//  * max_new_tokens larger than the room left in the context is clamped, not rejected
//    (CheckPromptLength); the sequence then ends with FINISH_REASON_LENGTH.
#ifndef TANDEM_COORDINATOR_REQUEST_VALIDATION_H_
#define TANDEM_COORDINATOR_REQUEST_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/proposers/lookahead_params.h"
#include "coordinator/request_sampling.h"
#include "tandem/v1/tandem.pb.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

// Limits of this server (also reported by GetModelInfo).
struct ServerLimits {
  int context_length = 0;            // Max prompt + generated tokens per sequence, >= 2.
  int max_new_tokens_limit = 4096;   // Upper bound of GenerateRequest.max_new_tokens.
  int default_max_new_tokens = 128;  // Used when max_new_tokens is 0.
  // What unset sampling fields take: the model's generation_config.json defaults
  // (RequestSamplingDefaultsFrom); none by default (greedy, no top-k or top-p limit).
  RequestSamplingDefaults sampling_defaults;
  int max_speculative_tokens = 8;  // Upper bound of K.
  int max_tree_nodes = 16;         // Upper bound of speculation.draft_tree_nodes (verify nodes).
  int vocab_size = 0;              // Target vocabulary size, >= 1.
  int max_prompt_bytes = 1 << 20;  // Prompt text size limit.
  int max_stop_strings = 8;
  int max_stop_bytes = 256;  // Per stop string.
  int max_request_id_chars = 128;
  // Methods this server can run besides AUTO and NONE (always accepted).
  absl::flat_hash_set<tandem::v1::SpeculationMethod> available_methods = {
      tandem::v1::SPECULATION_METHOD_DRAFT, tandem::v1::SPECULATION_METHOD_PROMPT_LOOKUP};
};

// The rule ACCEPTANCE_RULE_DEFAULT resolves to: GREEDY at temperature 0; with sampling,
// COUPLED when the request carries a seed (its output is then a function of prompt,
// seed and sampling alone, whatever the method, K and load: tandem.proto's contract),
// REJECTION when the server draws the seed. bench/README.md has the measurement behind
// the choice.
tandem::v1::AcceptanceRule DefaultAcceptanceRule(float temperature, bool seed_from_request);

// INVALID_ARGUMENT when the limits themselves are inconsistent (server configuration
// error; check once at startup).
absl::Status ValidateServerLimits(const ServerLimits& limits);

struct ResolvedSpeculation {
  // Requested method; AUTO stays AUTO (resolved per step by the engine), NONE when the
  // request fixed K = 0. Never an unavailable method.
  tandem::v1::SpeculationMethod method = tandem::v1::SPECULATION_METHOD_AUTO;
  // Fixed K in [0, max_speculative_tokens]; nullopt = adaptive K.
  std::optional<int> fixed_k;
  // Never ACCEPTANCE_RULE_DEFAULT (DefaultAcceptanceRule resolves it).
  tandem::v1::AcceptanceRule rule = tandem::v1::ACCEPTANCE_RULE_GREEDY;
  // Parameters of `rule`, defaults applied; 0 for parameters the rule does not use.
  float alpha = 0.0f;
  float theta_first = 0.0f;
  float theta_last = 0.0f;
  float epsilon = 0.0f;
  float delta = 0.0f;
  // Scheduling hint (never changes outputs): DEFAULT, ON or OFF.
  tandem::v1::Pipelining pipelining = tandem::v1::PIPELINING_DEFAULT;
  // LOOKAHEAD's W, N, G (ResolveLookaheadParams; the defaults for other methods).
  LookaheadConfig lookahead;
  // DRAFT's dynamic tree node budget (speculation.draft_tree_nodes); nullopt = the
  // server's --draft_tree_nodes.
  std::optional<int> draft_tree_nodes;
};

struct ValidatedRequest {
  std::string request_id;  // Client's, or assigned when it sent none.
  bool request_id_assigned = false;
  bool prompt_is_text = false;            // Which of the two fields below holds the prompt.
  std::string prompt_text;                // Valid UTF-8, 1 .. max_prompt_bytes bytes.
  std::vector<int32_t> prompt_token_ids;  // 1 .. context_length - 1 ids in [0, vocab).
  int max_new_tokens = 0;                 // [1, max_new_tokens_limit], default applied;
                                          // clamp to the context with CheckPromptLength.
  std::vector<std::string> stop;          // Non-empty valid UTF-8 strings.
  ResolvedSampling sampling;
  ResolvedSpeculation speculation;
  bool return_token_ids = false;
  bool return_logprobs = false;
  bool ignore_eos = false;
};

// Validates `request` against `limits` (which must pass ValidateServerLimits) and
// resolves its defaults. `random` draws the seed and the request id when the request
// leaves them unset.
absl::StatusOr<ValidatedRequest> ValidateRequest(const tandem::v1::GenerateRequest& request,
                                                 const ServerLimits& limits,
                                                 absl::BitGenRef random);
// Same, with a thread-local absl::BitGen as the random source.
absl::StatusOr<ValidatedRequest> ValidateRequest(const tandem::v1::GenerateRequest& request,
                                                 const ServerLimits& limits);

// Fits a tokenised prompt into the context: returns the effective max_new_tokens,
// min(max_new_tokens, context_length - prompt_tokens) (the sequence ends with
// FINISH_REASON_LENGTH when it reaches it). INVALID_ARGUMENT when the prompt is empty
// or leaves no room for a generated token (prompt_tokens + 1 > context_length).
absl::StatusOr<int> CheckPromptLength(int prompt_tokens, int max_new_tokens,
                                      const ServerLimits& limits);

// The worker-side sampling configuration of a validated request.
tandem::v1::SequenceSampling ToSequenceSampling(const ValidatedRequest& request);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_REQUEST_VALIDATION_H_
