// tandem-coordinator: serves tandem.v1.Tandem (and the rendezvous service the target
// group uses to form), and drives the draft worker and the target group.
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "comm/rendezvous_service.h"
#include "common/auth.h"
#include "common/server.h"
#include "common/tls.h"
#include "coordinator/chat_prompt.h"
#include "coordinator/engine.h"
#include "coordinator/engine_flags.h"
#include "coordinator/metrics.h"
#include "coordinator/openai_server.h"
#include "coordinator/request_sampling.h"
#include "coordinator/request_submitter.h"
#include "coordinator/request_validation.h"
#include "coordinator/tandem_service.h"
#include "coordinator/worker_client.h"
#include "model/generation_config.h"
#include "model/tokenizer.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051", "Public API address (host:port).");
ABSL_FLAG(std::string, target, "", "Target group leader (rank 0) address, host:port.");
ABSL_FLAG(std::string, draft, "", "Draft worker address, host:port; empty = no draft worker.");
ABSL_FLAG(std::string, tokenizer, "",
          "Target model directory (or tokenizer.model path) for tokenisation.");
ABSL_FLAG(std::string, rendezvous_listen, "",
          "Address of the rendezvous service for the target group (host:port); "
          "empty = not served.");
ABSL_FLAG(std::string, metrics_listen, "",
          "Prometheus /metrics address (host:port); empty = no HTTP endpoint.");
ABSL_FLAG(std::string, openai_listen, "",
          "OpenAI-compatible HTTP API address (host:port; port 0 = a free one): /v1/completions, "
          "/v1/chat/completions, /v1/models, /health; empty = not served.");
ABSL_FLAG(int, openai_max_body_bytes, 4 << 20,
          "Largest OpenAI API request body, bytes; larger ones are answered 413.");
ABSL_FLAG(int, openai_threads, 64,
          "OpenAI API connections served at once (each request holds one while it runs).");
ABSL_FLAG(int, max_message_bytes, 4 << 20,
          "Largest public API message (request or response), bytes; larger ones are "
          "refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, worker_max_message_bytes, 64 << 20,
          "Largest message exchanged with the workers and the rendezvous clients, bytes.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the public API; with --tls_key turns TLS on.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle; when set, public API clients must present a certificate it signed.");
ABSL_FLAG(std::string, health_listen, "",
          "host:port of an extra plaintext server with only gRPC health (for probes that "
          "cannot do TLS, e.g. Kubernetes gRPC probes); empty = none.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the bearer token every public API call must carry "
          "(authorization: Bearer TOKEN); health and reflection stay open.");
ABSL_FLAG(std::string, auth_token_env, "",
          "Name of an environment variable holding the bearer token (instead of "
          "--auth_token_file).");
ABSL_FLAG(std::string, worker_tls_cert, "",
          "PEM certificate the coordinator presents to the workers (mutual TLS) and serves "
          "the rendezvous service with.");
ABSL_FLAG(std::string, worker_tls_key, "", "PEM private key of --worker_tls_cert.");
ABSL_FLAG(std::string, worker_tls_ca, "",
          "PEM CA bundle the workers' certificates must chain to; also required of the "
          "rendezvous service's clients. Setting it turns TLS to the workers on.");
ABSL_FLAG(std::string, worker_tls_server_name, "",
          "Name to verify in the workers' certificates instead of the host of --target / "
          "--draft (e.g. when they are reached by IP).");

namespace tandem::coordinator {
namespace {

v1::ModelDescription Describe(const v1::DescribeResponse& d) { return d.model(); }

// The OpenAI-compatible API when --openai_listen is set (else null).
absl::StatusOr<std::unique_ptr<OpenAiServer>> StartOpenAiServer(Engine* engine,
                                                                const RequestSubmitter* submitter,
                                                                const BearerTokenVerifier* auth,
                                                                CoordinatorMetrics* metrics,
                                                                const std::string& model_name) {
  if (absl::GetFlag(FLAGS_openai_listen).empty()) return nullptr;
  OpenAiServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_openai_listen);
  options.max_body_bytes =
      static_cast<size_t>(std::max(1024, absl::GetFlag(FLAGS_openai_max_body_bytes)));
  options.threads = std::max(1, absl::GetFlag(FLAGS_openai_threads));
  options.model_name = model_name;
  options.healthy = [engine] { return engine->target_available() && !ShutdownRequested(); };
  absl::StatusOr<std::unique_ptr<OpenAiServer>> server =
      OpenAiServer::Start(options, submitter, auth, metrics);
  if (server.ok()) LOG(INFO) << "OpenAI-compatible API on port " << (*server)->port();
  return server;
}

int Run() {
  InstallShutdownSignalHandlers();
  if (absl::GetFlag(FLAGS_target).empty() || absl::GetFlag(FLAGS_tokenizer).empty()) {
    std::fprintf(stderr, "tandem-coordinator: --target and --tokenizer are required\n");
    return 2;
  }
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::Load(absl::GetFlag(FLAGS_tokenizer));
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", tokenizer.status().ToString().c_str());
    return 2;
  }

  // TLS and authentication: every file is read and checked now, so a bad one stops
  // start-up with one line.
  TlsFiles public_tls{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                      absl::GetFlag(FLAGS_tls_ca), "tls"};
  TlsFiles worker_tls{absl::GetFlag(FLAGS_worker_tls_cert), absl::GetFlag(FLAGS_worker_tls_key),
                      absl::GetFlag(FLAGS_worker_tls_ca), "worker_tls"};
  auto public_credentials = MakeServerCredentials(public_tls);
  auto worker_credentials = MakeChannelCredentials(worker_tls);
  // The rendezvous service is served with the coordinator's worker-side certificate.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> rendezvous_credentials =
      grpc::InsecureServerCredentials();
  if (!absl::GetFlag(FLAGS_rendezvous_listen).empty()) {
    if (ClientTlsEnabled(worker_tls) && !ServerTlsEnabled(worker_tls)) {
      std::fprintf(stderr,
                   "tandem-coordinator: --worker_tls_ca is set with --rendezvous_listen: the "
                   "rendezvous service needs --worker_tls_cert and --worker_tls_key too\n");
      return 2;
    }
    rendezvous_credentials = MakeServerCredentials(worker_tls);
  }
  auto token =
      TokenFromFlags(absl::GetFlag(FLAGS_auth_token_file), absl::GetFlag(FLAGS_auth_token_env),
                     "--auth_token_file", "--auth_token_env");
  for (const absl::Status& s : {public_credentials.status(), worker_credentials.status(),
                                rendezvous_credentials.status(), token.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "tandem-coordinator: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  const BearerTokenVerifier verifier(*token);
  const std::pair<const char*, int> message_limits[] = {
      {"max_message_bytes", absl::GetFlag(FLAGS_max_message_bytes)},
      {"worker_max_message_bytes", absl::GetFlag(FLAGS_worker_max_message_bytes)}};
  for (const auto& [name, bytes] : message_limits) {
    if (bytes < 1024) {
      std::fprintf(stderr, "tandem-coordinator: --%s=%d must be at least 1024 bytes\n", name,
                   bytes);
      return 2;
    }
  }

  // The rendezvous service comes up first: the target group needs it to form.
  RendezvousService rendezvous;
  std::unique_ptr<GrpcServer> rendezvous_server;
  if (!absl::GetFlag(FLAGS_rendezvous_listen).empty()) {
    ServerOptions opts;
    opts.listen_address = absl::GetFlag(FLAGS_rendezvous_listen);
    opts.credentials = *rendezvous_credentials;
    opts.max_message_bytes = absl::GetFlag(FLAGS_worker_max_message_bytes);
    opts.health_services = {v1::Rendezvous::service_full_name()};
    auto server = GrpcServer::Start(opts, {&rendezvous});
    if (!server.ok()) {
      std::fprintf(stderr, "tandem-coordinator: rendezvous: %s\n",
                   server.status().ToString().c_str());
      return 2;
    }
    rendezvous_server = *std::move(server);
    rendezvous_server->SetServing(true);
    LOG(INFO) << "rendezvous service on " << rendezvous_server->address();
  }

  std::unique_ptr<CoordinatorMetrics> metrics;
  {
    MetricsOptions mo;
    mo.listen_address = absl::GetFlag(FLAGS_metrics_listen);
    mo.max_speculative_tokens = absl::GetFlag(FLAGS_max_k);
    auto m = CoordinatorMetrics::Create(mo);
    if (!m.ok()) {
      std::fprintf(stderr, "tandem-coordinator: metrics: %s\n", m.status().ToString().c_str());
      return 2;
    }
    metrics = *std::move(m);
    if (metrics->port() > 0) LOG(INFO) << "metrics on port " << metrics->port();
  }

  WorkerClientOptions wo;
  wo.step_timeout = absl::Seconds(absl::GetFlag(FLAGS_step_timeout_s));
  wo.credentials = *worker_credentials;
  wo.tls_server_name = absl::GetFlag(FLAGS_worker_tls_server_name);
  wo.max_message_bytes = absl::GetFlag(FLAGS_worker_max_message_bytes);
  wo.address = absl::GetFlag(FLAGS_target);
  auto target = std::make_unique<WorkerClient>(wo);
  std::unique_ptr<WorkerApi> draft;
  if (!absl::GetFlag(FLAGS_draft).empty()) {
    wo.address = absl::GetFlag(FLAGS_draft);
    draft = std::make_unique<WorkerClient>(wo);
  }

  absl::StatusOr<GenerationConfig> generation =
      LoadGenerationConfig(ModelDirectoryOf(absl::GetFlag(FLAGS_tokenizer)), *tokenizer);
  if (!generation.ok()) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", generation.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<EngineOptions> eo = EngineOptionsFromFlags(generation->stop_token_ids);
  if (!eo.ok()) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", std::string(eo.status().message()).c_str());
    return 2;
  }

  Engine engine(*eo, &*tokenizer, std::move(target), std::move(draft), metrics.get());
  if (absl::Status s = engine.Start(absl::Seconds(absl::GetFlag(FLAGS_worker_wait_s)),
                                    [] { return ShutdownRequested(); });
      !s.ok()) {
    if (ShutdownRequested()) return 0;  // Stopped while waiting for the workers.
    std::fprintf(stderr, "tandem-coordinator: %s\n", s.ToString().c_str());
    return 1;
  }
  const ClusterInfo cluster = engine.cluster();

  ServerLimits limits;
  limits.context_length = static_cast<int>(cluster.target.context_length());
  limits.max_new_tokens_limit = absl::GetFlag(FLAGS_max_new_tokens_limit);
  limits.max_speculative_tokens =
      std::min<int>(absl::GetFlag(FLAGS_max_k), cluster.target.max_speculative_tokens());
  limits.max_tree_nodes = static_cast<int>(cluster.target.max_speculative_tokens());
  limits.vocab_size = static_cast<int>(cluster.target.model().vocab_size());
  limits.sampling_defaults = RequestSamplingDefaultsFrom(generation->sampling);
  limits.available_methods.clear();
  for (v1::SpeculationMethod m : engine.proposers().served_methods()) {
    limits.available_methods.insert(m);
  }
  if (absl::Status s = ValidateServerLimits(limits); !s.ok()) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", s.ToString().c_str());
    return 2;
  }

  v1::ModelInfo info;
  *info.mutable_target() = Describe(cluster.target);
  if (cluster.draft_described) *info.mutable_draft() = Describe(cluster.draft);
  info.set_context_length(limits.context_length);
  info.set_max_new_tokens_limit(limits.max_new_tokens_limit);
  info.set_max_speculative_tokens(limits.max_speculative_tokens);
  info.set_max_tree_nodes(limits.max_tree_nodes);
  info.set_bos_token_id(tokenizer->bos_id());
  info.set_eos_token_id(tokenizer->eos_id());
  for (int id : generation->stop_token_ids) info.add_stop_token_ids(id);
  *info.mutable_default_sampling() =
      DefaultSamplingParams(limits.sampling_defaults, limits.vocab_size);
  LOG(INFO) << "unset sampling fields default to " << info.default_sampling().ShortDebugString();
  for (v1::SpeculationMethod m : engine.proposers().listed_methods()) info.add_methods(m);
  info.set_max_queue(eo->max_queue);

  // Chat prompts use the target's chat template (none: chat requests are refused).
  const std::filesystem::path tokenizer_path = absl::GetFlag(FLAGS_tokenizer);
  absl::StatusOr<ChatRenderer> chat = ModelChatRenderer(
      std::filesystem::is_directory(tokenizer_path) ? tokenizer_path.string()
                                                    : tokenizer_path.parent_path().string());
  if (!chat.ok()) {
    std::fprintf(stderr, "tandem-coordinator: chat template: %s\n",
                 std::string(chat.status().message()).c_str());
    return 2;
  }
  LOG(INFO) << (*chat ? "chat template loaded" : "the model has no chat template");
  TandemService service(&engine, &*tokenizer, limits, info, metrics.get(), &verifier, *chat);
  ServerOptions so;
  so.listen_address = absl::GetFlag(FLAGS_listen);
  so.credentials = *public_credentials;
  so.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  so.health_services = {v1::Tandem::service_full_name()};
  auto server = GrpcServer::Start(so, {&service});
  if (!server.ok()) {
    std::fprintf(stderr, "tandem-coordinator: %s\n", server.status().ToString().c_str());
    return 2;
  }
  const RequestSubmitter openai_submitter(&engine, &*tokenizer, limits, *chat);
  absl::StatusOr<std::unique_ptr<OpenAiServer>> openai_server =
      StartOpenAiServer(&engine, &openai_submitter, &verifier, metrics.get(), info.target().name());
  if (!openai_server.ok()) {
    std::fprintf(stderr, "tandem-coordinator: --openai_listen: %s\n",
                 std::string(openai_server.status().message()).c_str());
    return 2;
  }
  std::unique_ptr<GrpcServer> health_server;
  if (!absl::GetFlag(FLAGS_health_listen).empty()) {
    ServerOptions ho;
    ho.listen_address = absl::GetFlag(FLAGS_health_listen);
    ho.health_services = so.health_services;  // It stands in for the public port.
    auto started = GrpcServer::Start(ho, {});
    if (!started.ok()) {
      std::fprintf(stderr, "tandem-coordinator: --health_listen: %s\n",
                   std::string(started.status().message()).c_str());
      return 2;
    }
    health_server = *std::move(started);
    health_server->SetServing(true);
  }
  (*server)->SetServing(true);
  LOG(INFO) << "tandem-coordinator serving on " << (*server)->address()
            << (ServerTlsEnabled(public_tls) ? (public_tls.ca.empty() ? " (TLS)" : " (mutual TLS)")
                                             : " (plaintext)")
            << (verifier.enabled() ? ", bearer token required" : "")
            << (ClientTlsEnabled(worker_tls)
                    ? (worker_tls.cert.empty() ? "; workers over TLS" : "; workers over mutual TLS")
                    : "");
  std::printf("tandem-coordinator listening on %s\n", (*server)->address().c_str());
  if (*openai_server != nullptr) {
    std::printf("openai api on port %d\n", (*openai_server)->port());
  }
  std::fflush(stdout);

  // Draining: health (the public port's and --health_listen's, "" and
  // tandem.v1.Tandem) turns NOT_SERVING first, then the calls in flight finish.
  int sig = WaitForShutdownSignal();
  LOG(INFO) << "signal " << sig << ": draining";
  if (health_server != nullptr) health_server->SetServing(false);
  (*server)->Shutdown(absl::Seconds(10));
  engine.Stop();  // Ends the OpenAI API's requests in flight too (UNAVAILABLE).
  openai_server->reset();
  (*server)->Wait();
  if (rendezvous_server) rendezvous_server->Shutdown(absl::Seconds(1));
  if (health_server != nullptr) health_server->Shutdown(absl::ZeroDuration());
  return 0;
}

}  // namespace
}  // namespace tandem::coordinator

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tandem-coordinator --target=HOST:PORT --tokenizer=MODEL_DIR [--draft=HOST:PORT] ...\n"
      "Serves tandem.v1.Tandem with speculative decoding over a draft worker and a "
      "target group.");
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  return tandem::coordinator::Run();
}
