#include "client/generate_command.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/generate_result.h"
#include "client/request_options.h"
#include "client/server_channel.h"
#include "client/shared_flags.h"
#include "tandem/v1/tandem.grpc.pb.h"

ABSL_FLAG(std::optional<double>, top_p, std::nullopt, "Nucleus sampling mass.");
ABSL_FLAG(std::optional<int>, top_k, std::nullopt, "Top-k sampling; 0 = no limit.");
ABSL_FLAG(std::string, method, "auto", "Speculation method.");
ABSL_FLAG(std::string, accept, "default", "Acceptance rule.");
ABSL_FLAG(std::optional<double>, alpha, std::nullopt, "threshold/ratio parameter.");
ABSL_FLAG(std::optional<double>, theta_first, std::nullopt, "position: first threshold.");
ABSL_FLAG(std::optional<double>, theta_last, std::nullopt, "position: last threshold.");
ABSL_FLAG(std::optional<double>, epsilon, std::nullopt, "typical: probability cap.");
ABSL_FLAG(std::optional<double>, delta, std::nullopt, "typical: entropy scale.");
ABSL_FLAG(std::string, stop, "", "Stop string (repeatable).");
ABSL_FLAG(bool, quiet, false, "Do not print statistics.");
ABSL_FLAG(bool, chat, false, "Send PROMPT as a user chat message (the model's chat template).");
ABSL_FLAG(std::string, system, "", "With --chat: a system message before PROMPT.");

namespace tandem::client {
namespace {

std::optional<float> AsFloat(const std::optional<double>& v) {
  if (!v.has_value()) return std::nullopt;
  return static_cast<float>(*v);
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "tandem generate: %s\n", message.c_str());
  return 1;
}

// Turns the request's text prompt into a chat: an optional system message, then the text
// as the user's message.
void AsChat(const std::string& system, v1::GenerateRequest* request) {
  v1::ChatPrompt chat;
  if (!system.empty()) {
    v1::ChatMessage* m = chat.add_messages();
    m->set_role("system");
    m->set_content(system);
  }
  v1::ChatMessage* user = chat.add_messages();
  user->set_role("user");
  user->set_content(request->text());
  *request->mutable_chat() = std::move(chat);
}

// The request the flags describe for `prompt` (a chat with --chat; token ids and
// logprobs asked for with --json); INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<v1::GenerateRequest> RequestFromFlags(const Invocation& inv,
                                                     const std::string& prompt) {
  RequestOptions o;
  o.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  o.temperature = AsFloat(absl::GetFlag(FLAGS_temperature));
  o.top_p = AsFloat(absl::GetFlag(FLAGS_top_p));
  o.top_k = absl::GetFlag(FLAGS_top_k);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.k = absl::GetFlag(FLAGS_k);
  o.alpha = AsFloat(absl::GetFlag(FLAGS_alpha));
  o.theta_first = AsFloat(absl::GetFlag(FLAGS_theta_first));
  o.theta_last = AsFloat(absl::GetFlag(FLAGS_theta_last));
  o.epsilon = AsFloat(absl::GetFlag(FLAGS_epsilon));
  o.delta = AsFloat(absl::GetFlag(FLAGS_delta));
  o.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  if (auto it = inv.repeated.find("stop"); it != inv.repeated.end()) o.stop = it->second;
  auto method = ParseMethod(absl::GetFlag(FLAGS_method));
  auto accept = ParseAcceptanceRule(absl::GetFlag(FLAGS_accept));
  auto pipelining = ParsePipelining(absl::GetFlag(FLAGS_pipelining));
  for (const absl::Status& s : {method.status(), accept.status(), pipelining.status()}) {
    if (!s.ok()) return s;
  }
  o.method = *method;
  o.accept = *accept;
  o.pipelining = *pipelining;
  absl::StatusOr<v1::GenerateRequest> request = BuildRequest(o, prompt);
  if (!request.ok()) return request.status();
  if (absl::GetFlag(FLAGS_chat)) {
    AsChat(absl::GetFlag(FLAGS_system), &*request);
  } else if (!absl::GetFlag(FLAGS_system).empty()) {
    return absl::InvalidArgumentError("--system needs --chat");
  }
  if (absl::GetFlag(FLAGS_json)) {
    request->set_return_token_ids(true);
    request->set_return_logprobs(true);
  }
  return request;
}

int RunGenerate(const Invocation& inv) {
  std::string prompt = absl::StrJoin(inv.positional, " ");
  if (prompt.empty() || prompt == "-") {
    if (isatty(STDIN_FILENO) && prompt.empty()) {
      std::fprintf(stderr,
                   "tandem generate: give a PROMPT (or `-` to read it from stdin); "
                   "see `tandem generate --help`\n");
      return 2;
    }
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  absl::StatusOr<v1::GenerateRequest> request = RequestFromFlags(inv, prompt);
  if (!request.ok()) {
    std::fprintf(stderr, "tandem generate: %s\n", std::string(request.status().message()).c_str());
    return 2;
  }
  const bool as_json = absl::GetFlag(FLAGS_json);

  const std::string server = absl::GetFlag(FLAGS_server);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = ServerChannel(server);
  if (!channel.ok()) {
    std::fprintf(stderr, "tandem generate: %s\n", std::string(channel.status().message()).c_str());
    return 2;
  }
  auto stub = v1::Tandem::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout))));
  const absl::Time start = absl::Now();
  auto reader = stub->GenerateStream(&ctx, *request);
  v1::GenerateStreamResponse message;
  GenerateResult result;
  bool ends_with_newline = true;
  while (reader->Read(&message)) {
    AddStreamMessage(message, &result);
    if (!as_json && !message.text_delta().empty()) {
      std::fwrite(message.text_delta().data(), 1, message.text_delta().size(), stdout);
      std::fflush(stdout);
      ends_with_newline = message.text_delta().back() == '\n';
    }
  }
  const grpc::Status status = reader->Finish();
  result.client_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!ends_with_newline) std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!status.ok()) {
    std::string hint;
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      hint = absl::StrCat(" (is a server running at ", server, "? `tandem up` starts one)");
    }
    return Fail(
        absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                     ": ", status.error_message(), hint));
  }
  if (as_json) {
    std::printf("%s\n", GenerateResultJson(result).c_str());
  } else if (result.has_stats && !absl::GetFlag(FLAGS_quiet)) {
    std::fprintf(stderr, "%s\n",
                 FormatStats(result.stats, result.finish_reason, result.client_seconds).c_str());
  }
  return 0;
}

}  // namespace

Command GenerateCommand() {
  Command c;
  c.name = "generate";
  c.summary = "Generate text for a prompt, streamed to stdout (stats on stderr).";
  c.usage =
      "Usage: tandem generate [flags] PROMPT...\n"
      "       echo PROMPT | tandem generate [flags] -\n\n"
      "Streams the completion of PROMPT to stdout as tokens are committed, then prints\n"
      "the request's statistics to stderr: method used, acceptance rate, mean accepted\n"
      "length, tokens/s (client wall time), time to first token, time per output token.\n"
      "Unset --temperature, --top-p and --top-k take the model's defaults (its\n"
      "generation_config.json; `tandem info` shows them): greedy unless the model samples\n"
      "by default. Greedy (--temperature=0) every method produces the same text as\n"
      "--method=none; with sampling, lossless rules keep the target's distribution.";
  c.flags = {
      {"server", "HOST:PORT", "Tandem server (coordinator) address."},
      {"max_tokens", "N", "Tokens to generate (the server caps it)."},
      {"temperature", "T", "Sampling temperature; 0 = greedy decoding; unset = the model's."},
      {"top_p", "P", "Nucleus sampling mass in (0, 1]; unset = the model's, else no limit."},
      {"top_k", "N", "Sample among the N most likely tokens; 0 = no limit; unset = the model's."},
      {"seed", "N", "Sampling seed; unset = the server picks one (shown in stats)."},
      {"method", "M",
       "Speculation method: auto, none, draft, prompt_lookup (also medusa, "
       "lookahead where the server has them)."},
      {"k", "N", "Draft length K per step; 0 disables speculation; unset = adaptive K."},
      {"accept", "RULE",
       "Acceptance rule: default, greedy, rejection, coupled (lossless; coupled is "
       "token-identical to target-only sampling with the same seed), threshold, "
       "ratio, position, typical (lossy, opt-in)."},
      {"alpha", "A",
       "threshold: probability bound (default 0.3); ratio: ratio bound "
       "(default 0.5)."},
      {"theta_first", "T", "position: threshold of the first proposal (default 0.95)."},
      {"theta_last", "T", "position: threshold of the last proposal (default 0.70)."},
      {"epsilon", "E", "typical: hard probability cap (default 0.09)."},
      {"delta", "D", "typical: entropy scale (default 0.3)."},
      {"stop", "TEXT", "Stop generating when the text contains TEXT (not printed)."},
      {"pipelining", "MODE",
       "Draft/verify overlap for this request: default (server's "
       "choice), on or off. Changes timing only, never the text."},
      {"ignore_eos", "", "Keep generating past the end-of-sequence token."},
      {"timeout", "SECONDS", "Deadline of the request."},
      {"quiet", "", "Do not print the statistics line."},
      {"chat", "",
       "Send PROMPT as the user's chat message, rendered by the model's chat template on "
       "the server (a model without one refuses it)."},
      {"system", "TEXT", "With --chat: a system message before PROMPT."},
      {"json", "",
       "Print one JSON object instead of the streamed text: text, token_ids, logprobs, "
       "finish_reason, stats (RequestStats, proto field names), client_seconds."},
  };
  for (const CommandFlag& f : ConnectionFlags()) c.flags.push_back(f);
  c.repeatable = {"stop"};
  c.run = RunGenerate;
  return c;
}

}  // namespace tandem::client
