#include "coordinator/openai_server.h"

#include <httplib.h>

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/openai_response.h"

namespace tandem::coordinator {
namespace {

constexpr char kJson[] = "application/json";
// A whole response written in chunks: a content type httplib does not compress, so that
// every heartbeat reaches the socket at once.
constexpr char kChunkedJson[] = "application/json; charset=utf-8";

// The writes of one chunked response, with a heartbeat whenever nothing was written for
// an interval: the second write after the client closed its connection fails.
class HeartbeatWriter {
 public:
  HeartbeatWriter(httplib::DataSink& sink, std::string heartbeat, absl::Duration interval)
      : sink_(sink), heartbeat_(std::move(heartbeat)), interval_(interval) {}

  bool Write(const std::string& data) {
    if (ok_ && !data.empty()) ok_ = sink_.write(data.data(), data.size());
    last_write_ = absl::Now();
    return ok_;
  }
  // Writes a heartbeat if one is due; true when the client is gone.
  bool Gone() {
    if (ok_ && absl::Now() - last_write_ >= interval_) Write(heartbeat_);
    return !ok_;
  }
  bool ok() const { return ok_; }

 private:
  httplib::DataSink& sink_;
  const std::string heartbeat_;
  const absl::Duration interval_;
  absl::Time last_write_ = absl::Now();
  bool ok_ = true;
};

absl::Status ClientDisconnected() { return absl::CancelledError("the client disconnected"); }

}  // namespace

// The served request and what its response repeats.
struct OpenAiExchange {
  SubmittedRequest submitted;
  OpenAiResponseHeader header;
  bool stream = false;
  bool include_usage = false;
  bool followed = false;  // The content provider ran (else: cancel on release).
};

namespace {

OpenAiOutput OutputOf(OutputChunk& chunk) {
  OpenAiOutput out;
  out.text = std::move(chunk.text);
  out.token_ids = std::move(chunk.token_ids);
  out.logprobs = std::move(chunk.logprobs);
  if (chunk.final) out.finish_reason = chunk.finish_reason;
  return out;
}

}  // namespace

OpenAiServer::OpenAiServer(OpenAiServerOptions options, const RequestSubmitter* submitter,
                           const BearerTokenVerifier* auth, CoordinatorMetrics* metrics)
    : options_(std::move(options)),
      submitter_(submitter),
      auth_(auth),
      metrics_(metrics),
      http_(std::make_unique<httplib::Server>()) {}

OpenAiServer::~OpenAiServer() {
  http_->stop();
  if (listener_.joinable()) listener_.join();
}

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(OpenAiServerOptions options,
                                                                  const RequestSubmitter* submitter,
                                                                  const BearerTokenVerifier* auth,
                                                                  CoordinatorMetrics* metrics) {
  const std::string& address = options.listen_address;
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "OpenAI API listen address \"", address, "\" is not \"host:port\" (port 0 = a free one)"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  std::unique_ptr<OpenAiServer> server(
      new OpenAiServer(std::move(options), submitter, auth, metrics));
  server->Route();
  httplib::Server& http = *server->http_;
  port = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (port < 0) {
    return absl::UnavailableError(absl::StrCat("OpenAI API: cannot listen on ", address));
  }
  server->port_ = port;
  server->listener_ = std::thread([&http] { http.listen_after_bind(); });
  // Serving before returning: a stop() that came before the listener ran would be lost.
  for (int i = 0; i < 5000 && !http.is_running(); ++i) absl::SleepFor(absl::Milliseconds(1));
  return server;
}

void OpenAiServer::Route() {
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_tcp_nodelay(true);  // Each streamed event goes out at once (no Nagle delay).
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Generate(OpenAiEndpoint::kCompletions, req, res);
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Generate(OpenAiEndpoint::kChatCompletions, req, res);
  });
  auto models = [this](const httplib::Request& req, httplib::Response& res) {
    absl::Status s = CheckAuth(req);
    if (s.ok() && req.matches.size() > 1) s = CheckModel(req.matches[1]);
    if (!s.ok()) return Fail(s, res);
    const int64_t created = absl::ToUnixSeconds(absl::Now());
    if (req.matches.size() > 1) {
      res.set_content(absl::StrCat("{\"id\":\"", options_.model_name,
                                   "\",\"object\":\"model\",\"created\":", created,
                                   ",\"owned_by\":\"tandem\"}"),
                      kJson);
    } else {
      res.set_content(ModelListBody(options_.model_name, created), kJson);
    }
  };
  http_->Get("/v1/models", models);
  http_->Get("/v1/models/(.+)", models);
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (options_.healthy && !options_.healthy()) {
      res.status = 503;
      res.set_content(ErrorBody(absl::UnavailableError("not serving")), kJson);
      return;
    }
    res.set_content("{\"status\":\"ok\"}", kJson);
  });
  // Unknown paths (404), bodies over the limit (413), malformed HTTP (400): OpenAI's shape.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    absl::Status s = absl::UnknownError(absl::StrCat("HTTP ", res.status));
    if (res.status == 404) {
      s = absl::NotFoundError(absl::StrCat("unknown endpoint ", req.method, " ", req.path));
    } else if (res.status == 413) {
      s = absl::InvalidArgumentError("request body too large");
    } else if (res.status < 500) {
      s = absl::InvalidArgumentError(absl::StrCat("bad HTTP request (", res.status, ")"));
    }
    res.set_content(ErrorBody(s), kJson);
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(ErrorBody(absl::InternalError("internal error")), kJson);
      });
}

void OpenAiServer::Fail(const absl::Status& status, httplib::Response& res) {
  if (metrics_) metrics_->RecordRequest(status.code());
  res.status = HttpStatusOf(status);
  res.set_content(ErrorBody(status), kJson);
}

absl::Status OpenAiServer::CheckAuth(const httplib::Request& req) const {
  if (auth_ == nullptr) return absl::OkStatus();
  std::vector<std::string> values;
  for (size_t i = 0; i < req.get_header_value_count("Authorization"); ++i) {
    values.push_back(req.get_header_value("Authorization", i));
  }
  return auth_->CheckAuthorization({values.begin(), values.end()});
}

absl::Status OpenAiServer::CheckModel(const std::string& model) const {
  if (model == options_.model_name) return absl::OkStatus();
  return WithErrorCode(WithParam(absl::NotFoundError(absl::StrCat("the model \"", model,
                                                                  "\" does not exist; this "
                                                                  "server serves \"",
                                                                  options_.model_name, "\"")),
                                 "model"),
                       "model_not_found");
}

void OpenAiServer::Generate(OpenAiEndpoint endpoint, const httplib::Request& req,
                            httplib::Response& res) {
  if (absl::Status denied = CheckAuth(req); !denied.ok()) return Fail(denied, res);
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(endpoint, req.body);
  absl::Status s = parsed.status();
  if (s.ok()) s = CheckModel(parsed->model);
  if (!s.ok()) return Fail(s, res);
  ApplyOpenAiTemperatureDefault(submitter_->limits().sampling_defaults, &parsed->generate);
  absl::StatusOr<SubmittedRequest> submitted =
      submitter_->Submit(parsed->generate, absl::InfiniteFuture());
  if (!submitted.ok()) return Fail(submitted.status(), res);

  auto exchange = std::make_shared<OpenAiExchange>();
  exchange->submitted = *std::move(submitted);
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  exchange->header = {endpoint,
                      absl::StrCat(chat ? "chatcmpl-" : "cmpl-", exchange->submitted.request_id),
                      options_.model_name,
                      absl::ToUnixSeconds(absl::Now()),
                      parsed->logprobs,
                      &submitter_->tokenizer()};
  exchange->stream = parsed->stream;
  exchange->include_usage = parsed->include_usage;
  auto provider = [this, exchange](size_t, httplib::DataSink& sink) {
    return Respond(*exchange, sink);
  };
  auto release = [this, exchange](bool) {
    if (exchange->followed) return;
    submitter_->Cancel(exchange->submitted);
    if (metrics_) metrics_->RecordRequest(absl::StatusCode::kCancelled);
  };
  res.set_chunked_content_provider(exchange->stream ? "text/event-stream" : kChunkedJson,
                                   std::move(provider), std::move(release));
  if (exchange->stream) res.set_header("Cache-Control", "no-cache");
}

bool OpenAiServer::Respond(OpenAiExchange& x, httplib::DataSink& sink) {
  x.followed = true;
  HeartbeatWriter out(sink, x.stream ? ": keep-alive\n\n" : " ", options_.heartbeat);
  OpenAiOutput whole;
  v1::RequestStats stats;
  bool first = true;
  ClientLink link;
  link.deliver = [&](OutputChunk& chunk) {
    if (chunk.final) stats = chunk.stats;
    if (!x.stream) {
      OpenAiOutput part = OutputOf(chunk);
      whole.text += part.text;
      whole.token_ids.insert(whole.token_ids.end(), part.token_ids.begin(), part.token_ids.end());
      whole.logprobs.insert(whole.logprobs.end(), part.logprobs.begin(), part.logprobs.end());
      whole.finish_reason = part.finish_reason;
      return !out.Gone();
    }
    if (!chunk.final && chunk.text.empty() && chunk.token_ids.empty()) return !out.Gone();
    const bool ok = out.Write(StreamChunkEvent(x.header, OutputOf(chunk), first, x.include_usage));
    first = false;
    return ok;
  };
  link.gone = [&] { return out.Gone(); };
  link.gone_status = ClientDisconnected;
  absl::Status status = submitter_->Follow(x.submitted, link);
  if (metrics_) metrics_->RecordRequest(status.code());
  const int prompt_tokens = x.submitted.prompt_tokens;
  if (!status.ok()) {
    out.Write(x.stream ? absl::StrCat("data: ", ErrorBody(status), "\n\n") : ErrorBody(status));
  } else if (x.stream) {
    if (x.include_usage) out.Write(StreamUsageEvent(x.header, prompt_tokens, stats));
    out.Write(StreamDoneEvent());
  } else {
    out.Write(CompletionBody(x.header, whole, prompt_tokens, stats));
  }
  if (out.ok()) sink.done();
  return out.ok();
}

}  // namespace tandem::coordinator
