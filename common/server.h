// Shared gRPC server helper used by every Tandem server (coordinator, workers).
//
// Every server gets the standard health service (grpc.health.v1, for Kubernetes
// probes), server reflection (grpcurl works without .proto files), explicit message
// size limits, and graceful shutdown on SIGTERM/SIGINT: stop accepting calls, let the
// calls in flight finish (up to a grace period), then return.
#ifndef TANDEM_COMMON_SERVER_H_
#define TANDEM_COMMON_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {

struct ServerOptions {
  // "host:port"; port 0 picks a free port (see GrpcServer::port()).
  std::string listen_address = "0.0.0.0:0";
  // Transport credentials; null = plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Largest request/response message accepted, bytes.
  int max_message_bytes = 64 << 20;
  // Fully qualified names of the services whose health grpc.health.v1 reports besides
  // the whole server's (""), e.g. {"tandem.v1.Tandem"}; any other name is NOT_FOUND.
  // Each follows SetServing() and Shutdown() like "" does. A health-only server that
  // stands in for another (--health_listen) lists that server's names.
  std::vector<std::string> health_services;
};

// A running gRPC server. Owns the grpc::Server; the services are borrowed and must
// outlive it.
class GrpcServer {
 public:
  // Builds and starts a server for `services`. Health starts as NOT_SERVING for the
  // whole server and for each of `options.health_services` until SetServing(true).
  // Fails with a message naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      const ServerOptions& options, const std::vector<grpc::Service*>& services);

  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The bound TCP port.
  int port() const { return port_; }
  // "host:port" with the bound port substituted.
  const std::string& address() const { return address_; }

  // Health status reported for the whole server (service name "") and for every
  // service of ServerOptions::health_services.
  void SetServing(bool serving);

  // Drains: every health status turns NOT_SERVING for good, the server stops
  // accepting calls, waits up to `grace` for calls in flight, then cancels the rest.
  // Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

  // Blocks until Shutdown() has completed.
  void Wait();

  grpc::Server* raw() { return server_.get(); }

 private:
  GrpcServer() = default;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  bool shut_down_ = false;
};

// Installs handlers for SIGTERM and SIGINT that make WaitForShutdownSignal() return.
// Call once, early in main(). Also ignores SIGPIPE.
void InstallShutdownSignalHandlers();

// Blocks until SIGTERM/SIGINT arrives or RequestShutdown() is called. Returns the
// signal number (0 for RequestShutdown).
int WaitForShutdownSignal();

// Makes WaitForShutdownSignal() return as if a signal had arrived (tests, fatal errors).
void RequestShutdown();

// True once a shutdown signal or request has been seen.
bool ShutdownRequested();

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVER_H_
