// Starts the shared server helper on a loopback port and talks to it with real gRPC
// clients: health checking, server reflection, message size limits, shutdown.
#include "common/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_context.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tandem/v1/rendezvous.grpc.pb.h"
#include "testing/reflection_wire.pb.h"

namespace tandem {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// A trivial service so the server has something to list and to size-limit. A Set of
// key "block" waits until Unblock().
class EchoRendezvous final : public tandem::v1::Rendezvous::Service {
 public:
  grpc::Status Set(grpc::ServerContext*, const tandem::v1::SetRequest* request,
                   tandem::v1::SetResponse*) override {
    if (request->key() != "block") return grpc::Status::OK;
    absl::MutexLock lock(&mu_);
    blocked_ = true;
    mu_.Await(absl::Condition(&unblocked_));
    return grpc::Status::OK;
  }
  void WaitUntilBlocked() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&blocked_));
  }
  void Unblock() {
    absl::MutexLock lock(&mu_);
    unblocked_ = true;
  }

 private:
  absl::Mutex mu_;
  bool blocked_ = false, unblocked_ = false;
};

std::shared_ptr<grpc::Channel> Connect(const GrpcServer& server) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                             grpc::InsecureChannelCredentials());
}

// The status code of a health Check of `service`; `serving` gets the answer.
grpc::StatusCode CheckHealthCode(const std::shared_ptr<grpc::Channel>& ch,
                                 const std::string& service,
                                 HealthCheckResponse::ServingStatus* serving = nullptr) {
  auto stub = Health::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckRequest req;
  req.set_service(service);
  HealthCheckResponse resp;
  grpc::Status st = stub->Check(&ctx, req, &resp);
  if (serving != nullptr) *serving = resp.status();
  return st.error_code();
}

HealthCheckResponse::ServingStatus CheckHealth(const std::shared_ptr<grpc::Channel>& ch,
                                               const std::string& service = "") {
  HealthCheckResponse::ServingStatus serving = HealthCheckResponse::UNKNOWN;
  EXPECT_EQ(CheckHealthCode(ch, service, &serving), grpc::StatusCode::OK) << service;
  return serving;
}

TEST(GrpcServerTest, HealthFollowsServingState) {
  EchoRendezvous service;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  auto ch = Connect(**server);
  EXPECT_EQ(CheckHealth(ch), HealthCheckResponse::NOT_SERVING);
  (*server)->SetServing(true);
  EXPECT_EQ(CheckHealth(ch), HealthCheckResponse::SERVING);
  (*server)->SetServing(false);
  EXPECT_EQ(CheckHealth(ch), HealthCheckResponse::NOT_SERVING);
}

TEST(GrpcServerTest, ListedServicesHaveTheirOwnHealth) {
  EchoRendezvous service;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.health_services = {"tandem.v1.Rendezvous"};
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  auto ch = Connect(**server);
  EXPECT_EQ(CheckHealth(ch, "tandem.v1.Rendezvous"), HealthCheckResponse::NOT_SERVING);
  (*server)->SetServing(true);
  EXPECT_EQ(CheckHealth(ch, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealth(ch, "tandem.v1.Rendezvous"), HealthCheckResponse::SERVING);
  EXPECT_EQ(CheckHealthCode(ch, "tandem.v1.Tandem"), grpc::StatusCode::NOT_FOUND);
  (*server)->SetServing(false);
  EXPECT_EQ(CheckHealth(ch, "tandem.v1.Rendezvous"), HealthCheckResponse::NOT_SERVING);
  (*server)->SetServing(true);

  // Draining: a call is in flight, so Shutdown waits for it. Meanwhile a watch opened
  // before sees every status turn NOT_SERVING, and a probe's new Check gets NOT_SERVING
  // or, once the server has stopped accepting calls, UNAVAILABLE / CANCELLED; SetServing(true)
  // changes nothing any more.
  auto health = Health::NewStub(ch);
  grpc::ClientContext watch_context;
  HealthCheckRequest watch_request;
  watch_request.set_service("tandem.v1.Rendezvous");
  auto watch = health->Watch(&watch_context, watch_request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);
  std::thread call([&] {
    auto stub = tandem::v1::Rendezvous::NewStub(ch);
    grpc::ClientContext ctx;
    tandem::v1::SetRequest request;
    request.set_key("block");
    tandem::v1::SetResponse response;
    EXPECT_TRUE(stub->Set(&ctx, request, &response).ok()) << "the call in flight should finish";
  });
  service.WaitUntilBlocked();
  std::thread drain([&] { (*server)->Shutdown(absl::Seconds(10)); });
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  (*server)->SetServing(true);
  HealthCheckResponse::ServingStatus probed = HealthCheckResponse::UNKNOWN;
  const grpc::StatusCode code = CheckHealthCode(ch, "tandem.v1.Rendezvous", &probed);
  EXPECT_TRUE(code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::CANCELLED ||
              (code == grpc::StatusCode::OK && probed == HealthCheckResponse::NOT_SERVING))
      << code << " " << probed;
  watch_context.TryCancel();
  watch->Finish();
  service.Unblock();
  call.join();
  drain.join();
}

TEST(GrpcServerTest, ReflectionListsRegisteredServices) {
  EchoRendezvous service;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  auto ch = Connect(**server);

  grpc::internal::RpcMethod method("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                   grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::unique_ptr<grpc::ClientReaderWriter<testing::ReflectionRequest, testing::ReflectionResponse>>
      stream(grpc::internal::ClientReaderWriterFactory<
             testing::ReflectionRequest, testing::ReflectionResponse>::Create(ch.get(), method,
                                                                              &ctx));
  testing::ReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  testing::ReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "tandem.v1.Rendezvous"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "grpc.health.v1.Health"), names.end());

  // The descriptor of our service is served too (grpcurl needs it).
  testing::ReflectionRequest sym;
  sym.set_file_containing_symbol("tandem.v1.Rendezvous");
  ASSERT_TRUE(stream->Write(sym));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.has_file_descriptor_response()) << resp.error_response().error_message();
  EXPECT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST(GrpcServerTest, OversizedMessageIsRejected) {
  EchoRendezvous service;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.max_message_bytes = 1024;
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                      grpc::InsecureChannelCredentials(), args);
  auto stub = tandem::v1::Rendezvous::NewStub(ch);
  tandem::v1::SetRequest small, big;
  small.set_key("k");
  big.set_key("k");
  big.set_value(std::string(4096, 'x'));
  tandem::v1::SetResponse resp;
  grpc::ClientContext c1, c2;
  EXPECT_TRUE(stub->Set(&c1, small, &resp).ok());
  grpc::Status st = stub->Set(&c2, big, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
}

TEST(GrpcServerTest, UnbindableAddressIsAClearError) {
  EchoRendezvous service;
  ServerOptions options;
  options.listen_address = "not-an-address:99999";
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("not-an-address:99999"), std::string::npos);
}

TEST(GrpcServerTest, ShutdownStopsServingAndWaitReturns) {
  EchoRendezvous service;
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok());
  (*server)->SetServing(true);
  std::thread waiter([&] { (*server)->Wait(); });
  (*server)->Shutdown(absl::Milliseconds(100));
  waiter.join();
  auto stub = tandem::v1::Rendezvous::NewStub(Connect(**server));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  tandem::v1::SetResponse resp;
  EXPECT_FALSE(stub->Set(&ctx, tandem::v1::SetRequest(), &resp).ok());
}

TEST(ShutdownSignalTest, SigtermWakesTheWaiter) {
  InstallShutdownSignalHandlers();
  EXPECT_FALSE(ShutdownRequested());
  std::thread waiter([] { EXPECT_EQ(WaitForShutdownSignal(), SIGTERM); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  waiter.join();
  EXPECT_TRUE(ShutdownRequested());
}

}  // namespace
}  // namespace tandem
