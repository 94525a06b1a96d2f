#include "coordinator/request_validation.h"

#include <limits>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/utf8.h"
#include "spec/acceptance_params.h"

namespace tandem::coordinator {
namespace {

using tandem::v1::AcceptanceRule;
using tandem::v1::GenerateRequest;
using tandem::v1::SpeculationMethod;
using tandem::v1::SpeculationParams;

template <typename... Args>
absl::Status Invalid(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

using spec::ParamRange;

absl::Status ValidateRequestId(const std::string& id, const ServerLimits& limits) {
  if (static_cast<int>(id.size()) > limits.max_request_id_chars) {
    return Invalid("request_id: ", id.size(), " characters is too long; at most ",
                   limits.max_request_id_chars, " printable ASCII characters");
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c > 0x7E) {
      return Invalid("request_id: byte ", i, " (0x", absl::Hex(c, absl::kZeroPad2),
                     ") is not printable ASCII; only characters 0x20..0x7E are allowed");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePrompt(const GenerateRequest& request, const ServerLimits& limits,
                            ValidatedRequest* out) {
  switch (request.prompt_case()) {
    case GenerateRequest::kText: {
      const std::string& text = request.text();
      if (text.empty()) {
        return Invalid("text: the prompt is empty; it must be 1 .. ", limits.max_prompt_bytes,
                       " bytes of UTF-8");
      }
      if (static_cast<int64_t>(text.size()) > limits.max_prompt_bytes) {
        return Invalid("text: the prompt is ", text.size(), " bytes; at most ",
                       limits.max_prompt_bytes, " bytes are accepted");
      }
      const size_t bad = FindInvalidUtf8(text);
      if (bad != std::string::npos) {
        return Invalid("text: the prompt is not valid UTF-8 (invalid byte 0x",
                       absl::Hex(static_cast<unsigned char>(text[bad]), absl::kZeroPad2),
                       " at byte offset ", bad, ")");
      }
      out->prompt_is_text = true;
      out->prompt_text = text;
      return absl::OkStatus();
    }
    case GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) {
        return Invalid("token_ids.ids: the prompt is empty; it must have 1 .. ",
                       limits.context_length - 1, " token ids");
      }
      if (static_cast<int64_t>(ids.size()) + 1 > limits.context_length) {
        return Invalid("token_ids.ids: the prompt has ", ids.size(),
                       " tokens; at most context_length - 1 = ", limits.context_length - 1,
                       " fit (the context holds ", limits.context_length,
                       " tokens including at least one generated)");
      }
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= limits.vocab_size) {
          return Invalid("token_ids.ids[", i, "] = ", ids[i], " is outside [0, ", limits.vocab_size,
                         ") (the vocabulary size)");
        }
      }
      out->prompt_is_text = false;
      out->prompt_token_ids.assign(ids.begin(), ids.end());
      return absl::OkStatus();
    }
    case GenerateRequest::kChat:  // The server renders it to text before validation.
      return Invalid("chat: a chat prompt must be rendered with the chat template first");
    case GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return Invalid("prompt: missing; set either text (UTF-8), token_ids or chat");
}

absl::Status ValidateStops(const GenerateRequest& request, const ServerLimits& limits,
                           ValidatedRequest* out) {
  if (request.stop_size() > limits.max_stop_strings) {
    return Invalid("stop: ", request.stop_size(), " stop strings; at most ",
                   limits.max_stop_strings, " are accepted");
  }
  for (int i = 0; i < request.stop_size(); ++i) {
    const std::string& stop = request.stop(i);
    if (stop.empty() || static_cast<int>(stop.size()) > limits.max_stop_bytes) {
      return Invalid("stop[", i, "]: ", stop.size(), " bytes; each stop string must be 1 .. ",
                     limits.max_stop_bytes, " bytes");
    }
    const size_t bad = FindInvalidUtf8(stop);
    if (bad != std::string::npos) {
      return Invalid("stop[", i, "]: not valid UTF-8 (invalid byte at offset ", bad, ")");
    }
    out->stop.push_back(stop);
  }
  return absl::OkStatus();
}

// A rule parameter: present in the request or not, its valid range and default.
struct RuleParam {
  const char* name;
  bool present;
  float value;
  ParamRange range;
  float default_value;
  float* destination;
};

absl::Status ValidateSpeculation(const GenerateRequest& request, const ServerLimits& limits,
                                 const ResolvedSampling& sampling, ResolvedSpeculation* out) {
  const SpeculationParams& sp = request.speculation();
  const float temperature = sampling.temperature;
  if (!tandem::v1::SpeculationMethod_IsValid(sp.method())) {
    return Invalid("speculation.method = ", sp.method(),
                   " is not a known SpeculationMethod; valid values 0..5 (AUTO, NONE, DRAFT, "
                   "PROMPT_LOOKUP, MEDUSA, LOOKAHEAD)");
  }
  if (!tandem::v1::Pipelining_IsValid(sp.pipelining())) {
    return Invalid("speculation.pipelining = ", sp.pipelining(),
                   " is not a known Pipelining value; valid values 0..2 (DEFAULT, ON, OFF)");
  }
  out->pipelining = sp.pipelining();
  const SpeculationMethod method = sp.method();
  if (method != tandem::v1::SPECULATION_METHOD_AUTO &&
      method != tandem::v1::SPECULATION_METHOD_NONE && !limits.available_methods.contains(method)) {
    std::vector<std::string> enabled = {"SPECULATION_METHOD_AUTO", "SPECULATION_METHOD_NONE"};
    for (int m = 0; m <= tandem::v1::SpeculationMethod_MAX; ++m) {
      const auto candidate = static_cast<SpeculationMethod>(m);
      if (m > tandem::v1::SPECULATION_METHOD_NONE && limits.available_methods.contains(candidate)) {
        enabled.push_back(tandem::v1::SpeculationMethod_Name(candidate));
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "speculation.method = ", tandem::v1::SpeculationMethod_Name(method),
        " is not enabled on this server; enabled methods: ", absl::StrJoin(enabled, ", "),
        " (see GetModelInfo.methods)",
        method == tandem::v1::SPECULATION_METHOD_MEDUSA
            ? "; MEDUSA needs Medusa heads (medusa_lm_head.safetensors) in the target's model "
              "directory and the target worker's --medusa on"
            : ""));
  }

  out->method = method;
  if (sp.has_num_speculative_tokens()) {
    const int k = sp.num_speculative_tokens();
    if (k < 0 || k > limits.max_speculative_tokens) {
      return Invalid("speculation.num_speculative_tokens = ", k,
                     " is out of range; valid range [0, ", limits.max_speculative_tokens,
                     "] (0 = no speculation, unset = adaptive)");
    }
    if (k > 0 && method == tandem::v1::SPECULATION_METHOD_NONE) {
      return Invalid("speculation.num_speculative_tokens = ", k,
                     " contradicts speculation.method = SPECULATION_METHOD_NONE; leave it "
                     "unset or 0, or choose a speculation method");
    }
    out->fixed_k = k;
    if (k == 0) out->method = tandem::v1::SPECULATION_METHOD_NONE;
  }
  if (sp.draft_tree_nodes() < 0 || sp.draft_tree_nodes() > limits.max_tree_nodes) {
    return Invalid("speculation.draft_tree_nodes = ", sp.draft_tree_nodes(),
                   " is out of range; valid range [0, ", limits.max_tree_nodes, "]");
  }
  if (sp.has_draft_tree_nodes()) out->draft_tree_nodes = sp.draft_tree_nodes();
  absl::StatusOr<LookaheadConfig> lookahead =
      ResolveLookaheadParams(sp, method, limits.max_speculative_tokens);
  if (!lookahead.ok()) return lookahead.status();
  out->lookahead = *lookahead;

  if (!tandem::v1::AcceptanceRule_IsValid(sp.acceptance_rule())) {
    return Invalid("speculation.acceptance_rule = ", sp.acceptance_rule(),
                   " is not a known AcceptanceRule; valid values 0..7 (DEFAULT, GREEDY, "
                   "REJECTION, THRESHOLD, RATIO, POSITION, TYPICAL, COUPLED)");
  }
  AcceptanceRule rule = sp.acceptance_rule();
  if (rule == tandem::v1::ACCEPTANCE_RULE_DEFAULT)
    rule = DefaultAcceptanceRule(temperature, sampling.seed_from_request);
  if (rule == tandem::v1::ACCEPTANCE_RULE_GREEDY && temperature > 0.0f) {
    return Invalid(
        "speculation.acceptance_rule = ACCEPTANCE_RULE_GREEDY requires "
        "sampling.temperature = 0 (got ",
        temperature,
        "); use ACCEPTANCE_RULE_REJECTION or ACCEPTANCE_RULE_COUPLED (lossless) or DEFAULT");
  }
  out->rule = rule;

  const bool is_threshold = rule == tandem::v1::ACCEPTANCE_RULE_THRESHOLD;
  const bool is_ratio = rule == tandem::v1::ACCEPTANCE_RULE_RATIO;
  const bool is_position = rule == tandem::v1::ACCEPTANCE_RULE_POSITION;
  const bool is_typical = rule == tandem::v1::ACCEPTANCE_RULE_TYPICAL;
  struct ParamSpec {
    RuleParam param;
    bool used;
    const char* users;  // Rules that read the parameter.
  };
  const ParamSpec specs[] = {
      {{"alpha", sp.has_alpha(), sp.alpha(),
        is_threshold ? spec::kThresholdAlphaRange : spec::kRatioAlphaRange,
        is_threshold ? spec::kDefaultThresholdAlpha : spec::kDefaultRatioAlpha, &out->alpha},
       is_threshold || is_ratio,
       "ACCEPTANCE_RULE_THRESHOLD and ACCEPTANCE_RULE_RATIO"},
      {{"theta_first", sp.has_theta_first(), sp.theta_first(), spec::kProbabilityParamRange,
        spec::kDefaultThetaFirst, &out->theta_first},
       is_position,
       "ACCEPTANCE_RULE_POSITION"},
      {{"theta_last", sp.has_theta_last(), sp.theta_last(), spec::kProbabilityParamRange,
        spec::kDefaultThetaLast, &out->theta_last},
       is_position,
       "ACCEPTANCE_RULE_POSITION"},
      {{"epsilon", sp.has_epsilon(), sp.epsilon(), spec::kProbabilityParamRange,
        spec::kDefaultEpsilon, &out->epsilon},
       is_typical,
       "ACCEPTANCE_RULE_TYPICAL"},
      {{"delta", sp.has_delta(), sp.delta(), spec::kProbabilityParamRange, spec::kDefaultDelta,
        &out->delta},
       is_typical,
       "ACCEPTANCE_RULE_TYPICAL"},
  };
  for (const ParamSpec& spec : specs) {
    const RuleParam& p = spec.param;
    if (!spec.used) {
      if (p.present) {
        return Invalid("speculation.", p.name, " is only used by ", spec.users,
                       ", but the acceptance rule is ", tandem::v1::AcceptanceRule_Name(rule),
                       "; remove it or set speculation.acceptance_rule");
      }
      *p.destination = 0.0f;
      continue;
    }
    if (p.present && !p.range.Contains(p.value)) {
      return Invalid("speculation.", p.name, " = ", p.value, " is out of range for ",
                     tandem::v1::AcceptanceRule_Name(rule), "; valid range ", p.range.Text(),
                     " (default ", p.default_value, ")");
    }
    *p.destination = p.present ? p.value : p.default_value;
  }
  return absl::OkStatus();
}

}  // namespace

tandem::v1::AcceptanceRule DefaultAcceptanceRule(float temperature, bool seed_from_request) {
  if (!(temperature > 0.0f)) return tandem::v1::ACCEPTANCE_RULE_GREEDY;
  return seed_from_request ? tandem::v1::ACCEPTANCE_RULE_COUPLED
                           : tandem::v1::ACCEPTANCE_RULE_REJECTION;
}

absl::Status ValidateServerLimits(const ServerLimits& limits) {
  if (limits.context_length < 2) {
    return Invalid("server limits: context_length = ", limits.context_length, " must be >= 2");
  }
  if (limits.vocab_size < 1) {
    return Invalid("server limits: vocab_size = ", limits.vocab_size, " must be >= 1");
  }
  if (limits.max_new_tokens_limit < 1) {
    return Invalid("server limits: max_new_tokens_limit = ", limits.max_new_tokens_limit,
                   " must be >= 1");
  }
  if (limits.default_max_new_tokens < 1 ||
      limits.default_max_new_tokens > limits.max_new_tokens_limit) {
    return Invalid("server limits: default_max_new_tokens = ", limits.default_max_new_tokens,
                   " must be in [1, max_new_tokens_limit = ", limits.max_new_tokens_limit, "]");
  }
  if (absl::Status s = ValidateSamplingDefaults(limits.sampling_defaults); !s.ok()) {
    return Invalid("server limits: ", s.message());
  }
  if (limits.max_speculative_tokens < 0) {
    return Invalid("server limits: max_speculative_tokens = ", limits.max_speculative_tokens,
                   " must be >= 0");
  }
  if (limits.max_prompt_bytes < 1 || limits.max_stop_strings < 0 || limits.max_stop_bytes < 1 ||
      limits.max_request_id_chars < 0) {
    return Invalid(
        "server limits: max_prompt_bytes, max_stop_bytes must be >= 1 and "
        "max_stop_strings, max_request_id_chars >= 0");
  }
  for (SpeculationMethod m : limits.available_methods) {
    if (!tandem::v1::SpeculationMethod_IsValid(m)) {
      return Invalid("server limits: available_methods holds unknown method ", m);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ValidatedRequest> ValidateRequest(const GenerateRequest& request,
                                                 const ServerLimits& limits,
                                                 absl::BitGenRef random) {
  ValidatedRequest out;
  if (absl::Status s = ValidateRequestId(request.request_id(), limits); !s.ok()) return s;
  if (request.request_id().empty()) {
    out.request_id = absl::StrFormat("req-%016x", absl::Uniform<uint64_t>(random));
    out.request_id_assigned = true;
  } else {
    out.request_id = request.request_id();
  }
  if (absl::Status s = ValidatePrompt(request, limits, &out); !s.ok()) return s;

  if (request.max_new_tokens() > static_cast<uint32_t>(limits.max_new_tokens_limit)) {
    return Invalid("max_new_tokens = ", request.max_new_tokens(), " is over the server limit ",
                   limits.max_new_tokens_limit, "; valid range [1, ", limits.max_new_tokens_limit,
                   "] (0 = server default ", limits.default_max_new_tokens, ")");
  }
  out.max_new_tokens = request.max_new_tokens() == 0 ? limits.default_max_new_tokens
                                                     : static_cast<int>(request.max_new_tokens());

  if (absl::Status s = ValidateStops(request, limits, &out); !s.ok()) return s;
  if (absl::Status s = ResolveSampling(request.sampling(), limits.sampling_defaults,
                                       limits.vocab_size, random, &out.sampling);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateSpeculation(request, limits, out.sampling, &out.speculation);
      !s.ok()) {
    return s;
  }
  out.return_token_ids = request.return_token_ids();
  out.return_logprobs = request.return_logprobs();
  out.ignore_eos = request.ignore_eos();
  return out;
}

absl::StatusOr<ValidatedRequest> ValidateRequest(const GenerateRequest& request,
                                                 const ServerLimits& limits) {
  thread_local absl::BitGen random;
  return ValidateRequest(request, limits, random);
}

absl::StatusOr<int> CheckPromptLength(int prompt_tokens, int max_new_tokens,
                                      const ServerLimits& limits) {
  if (prompt_tokens < 1) {
    return Invalid("prompt: tokenises to ", prompt_tokens, " tokens; at least 1 is required");
  }
  if (max_new_tokens < 1) {
    return Invalid("max_new_tokens = ", max_new_tokens, " must be >= 1");
  }
  if (prompt_tokens + 1 > limits.context_length) {
    return Invalid("prompt: ", prompt_tokens, " tokens leave no room in the context of ",
                   limits.context_length, " tokens; at most ", limits.context_length - 1,
                   " prompt tokens fit (one generated token must fit too)");
  }
  const int room = limits.context_length - prompt_tokens;
  return max_new_tokens < room ? max_new_tokens : room;
}

tandem::v1::SequenceSampling ToSequenceSampling(const ValidatedRequest& request) {
  tandem::v1::SequenceSampling s;
  s.set_temperature(request.sampling.temperature);
  s.set_top_k(request.sampling.top_k);
  s.set_top_p(request.sampling.top_p);
  s.set_seed(request.sampling.seed);
  s.set_rule(request.speculation.rule);
  s.set_alpha(request.speculation.alpha);
  s.set_theta_first(request.speculation.theta_first);
  s.set_theta_last(request.speculation.theta_last);
  s.set_epsilon(request.speculation.epsilon);
  s.set_delta(request.speculation.delta);
  s.set_return_logprobs(request.return_logprobs);
  return s;
}

}  // namespace tandem::coordinator
