#include "client/request_options.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tandem::client {
namespace {

struct MethodEntry {
  const char* name;
  v1::SpeculationMethod value;
};
constexpr MethodEntry kMethods[] = {
    {"auto", v1::SPECULATION_METHOD_AUTO},
    {"none", v1::SPECULATION_METHOD_NONE},
    {"draft", v1::SPECULATION_METHOD_DRAFT},
    {"prompt_lookup", v1::SPECULATION_METHOD_PROMPT_LOOKUP},
    {"medusa", v1::SPECULATION_METHOD_MEDUSA},
    {"lookahead", v1::SPECULATION_METHOD_LOOKAHEAD},
};

struct RuleEntry {
  const char* name;
  v1::AcceptanceRule value;
};
constexpr RuleEntry kRules[] = {
    {"default", v1::ACCEPTANCE_RULE_DEFAULT},     {"greedy", v1::ACCEPTANCE_RULE_GREEDY},
    {"rejection", v1::ACCEPTANCE_RULE_REJECTION}, {"threshold", v1::ACCEPTANCE_RULE_THRESHOLD},
    {"ratio", v1::ACCEPTANCE_RULE_RATIO},         {"position", v1::ACCEPTANCE_RULE_POSITION},
    {"typical", v1::ACCEPTANCE_RULE_TYPICAL},     {"coupled", v1::ACCEPTANCE_RULE_COUPLED},
};

std::string Lower(const std::string& s) {
  std::string out = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s));
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

template <typename T, typename F>
absl::StatusOr<std::vector<T>> ParseList(const std::string& list, F parse_one) {
  std::vector<T> out;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    absl::StatusOr<T> v = parse_one(std::string(item));
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::SpeculationMethod> ParseMethod(const std::string& name) {
  const std::string n = Lower(name);
  for (const auto& m : kMethods) {
    if (n == m.name) return m.value;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown method '", name, "' (auto, none, draft, prompt_lookup, medusa, lookahead)"));
}

std::string MethodName(v1::SpeculationMethod method) {
  for (const auto& m : kMethods) {
    if (m.value == method) return m.name;
  }
  return absl::StrCat("method_", static_cast<int>(method));
}

absl::StatusOr<v1::AcceptanceRule> ParseAcceptanceRule(const std::string& name) {
  const std::string n = Lower(name);
  for (const auto& r : kRules) {
    if (n == r.name) return r.value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown acceptance rule '", name,
                   "' (default, greedy, rejection, threshold, ratio, position, typical, "
                   "coupled)"));
}

std::string AcceptanceRuleName(v1::AcceptanceRule rule) {
  for (const auto& r : kRules) {
    if (r.value == rule) return r.name;
  }
  return absl::StrCat("rule_", static_cast<int>(rule));
}

absl::StatusOr<v1::Pipelining> ParsePipelining(const std::string& name) {
  const std::string n = Lower(name);
  if (n == "default") return v1::PIPELINING_DEFAULT;
  if (n == "on") return v1::PIPELINING_ON;
  if (n == "off") return v1::PIPELINING_OFF;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown pipelining '", name, "' (default, on, off)"));
}

std::string PipeliningName(v1::Pipelining pipelining) {
  switch (pipelining) {
    case v1::PIPELINING_ON:
      return "on";
    case v1::PIPELINING_OFF:
      return "off";
    default:
      return "default";
  }
}

absl::StatusOr<std::vector<v1::SpeculationMethod>> ParseMethodList(const std::string& list) {
  return ParseList<v1::SpeculationMethod>(list, ParseMethod);
}

absl::StatusOr<std::vector<v1::Pipelining>> ParsePipeliningList(const std::string& list) {
  return ParseList<v1::Pipelining>(list, ParsePipelining);
}

absl::StatusOr<std::vector<v1::AcceptanceRule>> ParseAcceptanceRuleList(const std::string& list) {
  return ParseList<v1::AcceptanceRule>(list, ParseAcceptanceRule);
}

absl::StatusOr<std::vector<int>> ParsePositiveIntList(const std::string& list) {
  return ParseList<int>(list, [&list](const std::string& item) -> absl::StatusOr<int> {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", item, "' in '", list, "' is not a positive integer"));
    }
    return v;
  });
}

absl::StatusOr<std::vector<int>> ParseTreeNodesList(const std::string& list) {
  return ParseList<int>(list, [&list](const std::string& item) -> absl::StatusOr<int> {
    if (Lower(item) == "server") return kServerTreeNodes;
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", item, "' in '", list, "' is neither a node count >= 0 nor 'server'"));
    }
    return v;
  });
}

absl::StatusOr<v1::GenerateRequest> BuildRequest(const RequestOptions& o,
                                                 const std::string& prompt) {
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  if (o.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-tokens must be >= 1, got ", o.max_tokens));
  }
  if (o.temperature && *o.temperature < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--temperature must be >= 0, got ", *o.temperature));
  }
  if (o.top_k && *o.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--top-k must be >= 0, got ", *o.top_k));
  }
  if (o.k.has_value() && *o.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--k must be >= 0, got ", *o.k));
  }
  if (o.tree_nodes.has_value() && *o.tree_nodes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tree-nodes must be >= 0, got ", *o.tree_nodes));
  }
  v1::GenerateRequest req;
  req.set_text(prompt);
  req.set_max_new_tokens(static_cast<uint32_t>(o.max_tokens));
  for (const std::string& s : o.stop) req.add_stop(s);
  req.set_ignore_eos(o.ignore_eos);
  req.set_return_token_ids(o.return_token_ids);
  v1::SamplingParams* sampling = req.mutable_sampling();
  if (o.temperature) sampling->set_temperature(*o.temperature);
  if (o.top_k) sampling->set_top_k(*o.top_k);
  if (o.top_p) sampling->set_top_p(*o.top_p);
  if (o.seed) sampling->set_seed(*o.seed);
  v1::SpeculationParams* spec = req.mutable_speculation();
  spec->set_method(o.method);
  if (o.k) spec->set_num_speculative_tokens(*o.k);
  spec->set_acceptance_rule(o.accept);
  if (o.alpha) spec->set_alpha(*o.alpha);
  if (o.theta_first) spec->set_theta_first(*o.theta_first);
  if (o.theta_last) spec->set_theta_last(*o.theta_last);
  if (o.epsilon) spec->set_epsilon(*o.epsilon);
  if (o.delta) spec->set_delta(*o.delta);
  spec->set_pipelining(o.pipelining);
  if (o.method == v1::SPECULATION_METHOD_DRAFT && o.tree_nodes) {
    spec->set_draft_tree_nodes(*o.tree_nodes);
  }
  if (o.method == v1::SPECULATION_METHOD_LOOKAHEAD) {
    if (o.lookahead_window) spec->mutable_lookahead()->set_window(*o.lookahead_window);
    if (o.lookahead_ngram) spec->mutable_lookahead()->set_ngram(*o.lookahead_ngram);
    if (o.lookahead_guesses) spec->mutable_lookahead()->set_max_guesses(*o.lookahead_guesses);
  }
  return req;
}

absl::Status ParseLookahead(const std::string& text, RequestOptions* o) {
  if (text.empty()) return absl::OkStatus();
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  int v[3];
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &v[0]) ||
      !absl::SimpleAtoi(parts[1], &v[1]) || !absl::SimpleAtoi(parts[2], &v[2])) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lookahead: '", text, "' is not W,N,G (three integers)"));
  }
  o->lookahead_window = v[0];
  o->lookahead_ngram = v[1];
  o->lookahead_guesses = v[2];
  return absl::OkStatus();
}

std::string FormatStats(const v1::RequestStats& s, v1::FinishReason finish, double client_seconds) {
  const double seconds = client_seconds > 0 ? client_seconds : s.total_time_ms() / 1000.0;
  const double tokens_per_s = seconds > 0 ? s.generated_tokens() / seconds : 0;
  std::string finish_name = v1::FinishReason_Name(finish);
  if (finish_name.rfind("FINISH_REASON_", 0) == 0) finish_name = finish_name.substr(14);
  std::string out = absl::StrFormat("method=%s tokens=%u prompt_tokens=%u", MethodName(s.method()),
                                    s.generated_tokens(), s.prompt_tokens());
  if (s.draft_tokens_proposed() > 0) {
    absl::StrAppendFormat(&out, " acceptance=%.1f%% (%u/%u)", 100.0 * s.acceptance_rate(),
                          s.draft_tokens_accepted(), s.draft_tokens_proposed());
  } else {
    absl::StrAppend(&out, " acceptance=-");
  }
  absl::StrAppendFormat(&out,
                        " mean_accepted_length=%.2f tok/s=%.1f ttft=%.1fms tpot=%.1fms "
                        "steps=%u finish=%s",
                        s.mean_accepted_length(), tokens_per_s, s.time_to_first_token_ms(),
                        s.time_per_output_token_ms(), s.target_steps(),
                        absl::AsciiStrToLower(finish_name));
  if (s.fallback_steps() > 0) absl::StrAppend(&out, " fallback_steps=", s.fallback_steps());
  // Why steps ran without speculation (sorted by reason: the map's order is not).
  std::map<std::string, uint32_t> off(s.speculation_off_steps().begin(),
                                      s.speculation_off_steps().end());
  off.erase("not_requested");
  if (!off.empty()) {
    absl::StrAppend(&out, " spec_off=", absl::StrJoin(off, ",", absl::PairFormatter(":")));
  }
  if (s.predicted_speedup() > 0) {
    absl::StrAppendFormat(&out, " predicted_speedup=%.2f", s.predicted_speedup());
  }
  return out;
}

}  // namespace tandem::client
