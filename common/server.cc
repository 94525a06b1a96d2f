#include "common/server.h"

#include <fcntl.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

std::atomic<int> g_signal{-1};
int g_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  g_signal.store(sig);
  if (g_pipe[1] >= 0) {
    char c = 1;
    ssize_t n = write(g_pipe[1], &c, 1);
    (void)n;
  }
}

void EnsurePipe() {
  static std::atomic<bool> made{false};
  bool expected = false;
  if (made.compare_exchange_strong(expected, true)) {
    if (pipe(g_pipe) == 0) {
      fcntl(g_pipe[1], F_SETFL, O_NONBLOCK);
    }
  }
}

std::string HostPart(const std::string& address) {
  size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  std::unique_ptr<GrpcServer> self(new GrpcServer());
  grpc::ServerBuilder builder;
  auto creds = options.credentials ? options.credentials : grpc::InsecureServerCredentials();
  builder.AddListeningPort(options.listen_address, creds, &self->port_);
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  for (grpc::Service* service : services) {
    builder.RegisterService(service);
  }
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr || self->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen_address,
                                               " (address in use, or not a valid host:port)"));
  }
  self->address_ = absl::StrCat(HostPart(options.listen_address), ":", self->port_);
  grpc::HealthCheckServiceInterface* health = self->server_->GetHealthCheckService();
  if (health != nullptr) {
    // Registers the names; SetServing(bool) then updates every registered one.
    for (const std::string& name : options.health_services) {
      health->SetServingStatus(name, false);
    }
  }
  self->SetServing(false);
  return self;
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

void GrpcServer::SetServing(bool serving) {
  if (server_ == nullptr || shut_down_) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(serving);
}

void GrpcServer::Shutdown(absl::Duration grace) {
  if (server_ == nullptr || shut_down_) return;
  shut_down_ = true;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(false);
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
}

void GrpcServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

void InstallShutdownSignalHandlers() {
  EnsurePipe();
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int WaitForShutdownSignal() {
  EnsurePipe();
  while (g_signal.load() < 0) {
    char c;
    ssize_t n = read(g_pipe[0], &c, 1);
    if (n < 0 && errno != EINTR) break;
  }
  return g_signal.load();
}

void RequestShutdown() {
  EnsurePipe();
  OnSignal(0);
}

bool ShutdownRequested() { return g_signal.load() >= 0; }

}  // namespace tandem
