// A whole cluster with TLS everywhere, certificates made by openssl at test time:
//  * public API: TLS + bearer token (--tls_cert/--tls_key, --auth_token_file);
//  * coordinator -> workers: mutual TLS (--worker_tls_*), the workers require a
//    client certificate signed by the CA (--tls_ca);
//  * target group (tp 2) rendezvous through the coordinator's rendezvous service,
//    also mutual TLS.
// Checks that the right client is served end to end (speculative output identical to
// target-only), that plaintext, a wrong CA, a missing or wrong token are refused with
// their codes, that health and reflection stay open without a token, and that the
// workers and the rendezvous service refuse callers without a certificate from the CA.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <grpcpp/impl/codegen/sync_stream.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "common/tls.h"
#include "tandem/v1/rendezvous.grpc.pb.h"
#include "testing/reflection_wire.pb.h"
#include "tests/e2e/cluster.h"
#include "tests/security/test_certs.h"
#include "worker/process_test_util.h"

namespace tandem::security {
namespace {

using e2e::Cluster;
using e2e::ClusterOptions;
using ::tandem::testing::TestPki;
using worker::testing::Health;

constexpr char kToken[] = "tls-e2e-token-0123456789";

std::shared_ptr<grpc::ChannelCredentials> Credentials(const TlsFiles& files) {
  auto c = MakeChannelCredentials(files);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

class TlsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = worker::testing::TestTempDir();
    auto pki = ::tandem::testing::MakeTestPki(dir + "/tls_e2e_pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new TestPki(*pki);
    const std::string token_file = dir + "/tls_e2e_token";
    std::ofstream(token_file) << kToken << "\n";
    rendezvous_port_ = worker::testing::FreePort();
    health_port_ = worker::testing::FreePort();

    ClusterOptions options;
    options.tp = 2;
    options.tag = "tls";
    options.worker_flags = {"--tls_cert=" + pki_->server.cert, "--tls_key=" + pki_->server.key,
                            "--tls_ca=" + pki_->ca,
                            absl::StrCat("--rendezvous=127.0.0.1:", rendezvous_port_)};
    options.coordinator_flags = {"--tls_cert=" + pki_->server.cert,
                                 "--tls_key=" + pki_->server.key,
                                 "--auth_token_file=" + token_file,
                                 "--worker_tls_cert=" + pki_->coordinator.cert,
                                 "--worker_tls_key=" + pki_->coordinator.key,
                                 "--worker_tls_ca=" + pki_->ca,
                                 absl::StrCat("--rendezvous_listen=127.0.0.1:", rendezvous_port_),
                                 absl::StrCat("--health_listen=127.0.0.1:", health_port_)};
    options.client_credentials = Credentials({"", "", pki_->ca});
    options.client_token = kToken;
    auto cluster = Cluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete pki_;
  }

  static std::unique_ptr<v1::Tandem::Stub> PublicStub(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials, const std::string& token) {
    return v1::Tandem::NewStub(
        CreateChannelWithToken(cluster_->address(), credentials, grpc::ChannelArguments(), token));
  }

  static TestPki* pki_;
  static Cluster* cluster_;
  static int rendezvous_port_;
  static int health_port_;
};
TestPki* TlsE2eTest::pki_ = nullptr;
Cluster* TlsE2eTest::cluster_ = nullptr;
int TlsE2eTest::rendezvous_port_ = 0;
int TlsE2eTest::health_port_ = 0;

// Status codes of the three public methods through `stub`.
std::vector<grpc::StatusCode> PublicCalls(v1::Tandem::Stub* stub) {
  std::vector<grpc::StatusCode> codes;
  v1::GenerateRequest request;
  request.set_text("def add(a, b):");
  request.set_max_new_tokens(4);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::GenerateResponse response;
    codes.push_back(stub->Generate(&ctx, request, &response).error_code());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto reader = stub->GenerateStream(&ctx, request);
    v1::GenerateStreamResponse chunk;
    while (reader->Read(&chunk)) {
    }
    codes.push_back(reader->Finish().error_code());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ModelInfo info;
    codes.push_back(stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).error_code());
  }
  return codes;
}

TEST_F(TlsE2eTest, RightClientIsServedEndToEnd) {
  auto stub = cluster_->Client();
  auto none = e2e::Generate(stub.get(), "def fibonacci(n):", 48, v1::SPECULATION_METHOD_NONE, -1);
  ASSERT_TRUE(none.ok()) << none.status() << cluster_->Logs();
  auto draft = e2e::Generate(stub.get(), "def fibonacci(n):", 48, v1::SPECULATION_METHOD_DRAFT, 3);
  ASSERT_TRUE(draft.ok()) << draft.status() << cluster_->Logs();
  EXPECT_EQ(std::vector<int>(draft->token_ids().begin(), draft->token_ids().end()),
            std::vector<int>(none->token_ids().begin(), none->token_ids().end()));
  EXPECT_GT(draft->stats().draft_tokens_proposed(), 0u) << "the draft worker was not used";
  const std::vector<grpc::StatusCode> ok(3, grpc::StatusCode::OK);
  EXPECT_EQ(PublicCalls(stub.get()), ok);
}

TEST_F(TlsE2eTest, PublicApiRefusesPlaintextWrongCaAndBadTokens) {
  const auto tls = Credentials({"", "", pki_->ca});
  const std::vector<grpc::StatusCode> unavailable(3, grpc::StatusCode::UNAVAILABLE);
  const std::vector<grpc::StatusCode> unauthenticated(3, grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(PublicCalls(PublicStub(grpc::InsecureChannelCredentials(), kToken).get()), unavailable)
      << "plaintext";
  EXPECT_EQ(PublicCalls(PublicStub(Credentials({"", "", pki_->other_ca}), kToken).get()),
            unavailable)
      << "server certificate checked against another CA";
  EXPECT_EQ(PublicCalls(PublicStub(tls, "").get()), unauthenticated) << "no token";
  EXPECT_EQ(PublicCalls(PublicStub(tls, "wrong-token").get()), unauthenticated) << "wrong";
  EXPECT_EQ(PublicCalls(PublicStub(tls, std::string(kToken) + "x").get()), unauthenticated)
      << "token with a suffix";
}

TEST_F(TlsE2eTest, HealthAndReflectionNeedNoToken) {
  const auto tls = Credentials({"", "", pki_->ca});
  EXPECT_EQ(e2e::CheckHealthWith(cluster_->address(), tls), Health::kServing);
  // --health_listen: plaintext health for probes that cannot do TLS.
  EXPECT_EQ(worker::testing::CheckHealth(absl::StrCat("127.0.0.1:", health_port_)),
            Health::kServing);
  auto channel = grpc::CreateChannel(cluster_->address(), tls);
  grpc::internal::RpcMethod method("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                   grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<grpc::ClientReaderWriter<::tandem::testing::ReflectionRequest,
                                           ::tandem::testing::ReflectionResponse>>
      stream(grpc::internal::ClientReaderWriterFactory<
             ::tandem::testing::ReflectionRequest,
             ::tandem::testing::ReflectionResponse>::Create(channel.get(), method, &ctx));
  ::tandem::testing::ReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  ::tandem::testing::ReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> names;
  for (const auto& s : response.list_services_response().service()) names.push_back(s.name());
  EXPECT_NE(std::find(names.begin(), names.end(), "tandem.v1.Tandem"), names.end());
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(TlsE2eTest, WorkersAndRendezvousRequireACertificateFromTheCa) {
  struct Caller {
    const char* name;
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    grpc::StatusCode code;
  };
  const std::vector<Caller> callers = {
      {"the coordinator's certificate",
       Credentials({pki_->coordinator.cert, pki_->coordinator.key, pki_->ca}),
       grpc::StatusCode::OK},
      {"plaintext", grpc::InsecureChannelCredentials(), grpc::StatusCode::UNAVAILABLE},
      {"TLS without a client certificate", Credentials({"", "", pki_->ca}),
       grpc::StatusCode::UNAVAILABLE},
      {"a client certificate from another CA",
       Credentials({pki_->other.cert, pki_->other.key, pki_->ca}), grpc::StatusCode::UNAVAILABLE},
  };
  const std::vector<std::string> workers = {cluster_->target().leader_address(),
                                            cluster_->draft()->leader_address()};
  for (const Caller& c : callers) {
    for (const std::string& address : workers) {
      auto stats = e2e::WorkerStatsOf(address, c.credentials);
      EXPECT_EQ(stats.ok() ? grpc::StatusCode::OK : grpc::StatusCode::UNAVAILABLE, c.code)
          << c.name << " -> worker " << address << ": " << stats.status();
    }
    // The follower serves health only, with the same requirement.
    EXPECT_EQ(
        e2e::CheckHealthWith(cluster_->target().address(1), c.credentials) == Health::kServing,
        c.code == grpc::StatusCode::OK)
        << c.name << " -> follower";
    auto rendezvous = v1::Rendezvous::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", rendezvous_port_), c.credentials));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::SetRequest set;
    set.set_key("tls-e2e-probe");
    v1::SetResponse response;
    EXPECT_EQ(rendezvous->Set(&ctx, set, &response).error_code(), c.code)
        << c.name << " -> rendezvous";
  }
}

TEST_F(TlsE2eTest, WorkerHealthListenServesPlaintextHealthOnly) {
  const int port = worker::testing::FreePort();
  const int health = worker::testing::FreePort();
  auto worker = worker::testing::ChildProcess::Start(
      worker::testing::WorkerBinary(),
      {"--role=draft", "--model_dir=models/draft", "--threads=1",
       absl::StrCat("--listen=127.0.0.1:", port),
       absl::StrCat("--health_listen=127.0.0.1:", health), "--tls_cert=" + pki_->server.cert,
       "--tls_key=" + pki_->server.key, "--tls_ca=" + pki_->ca},
      worker::testing::TestTempDir() + "/tls-health-worker.log");
  ASSERT_TRUE(worker.ok()) << worker.status();
  const std::string health_address = absl::StrCat("127.0.0.1:", health);
  ASSERT_TRUE(worker::testing::WaitForHealth(health_address, Health::kServing, absl::Seconds(60)))
      << (*worker)->LogTail();
  // It stands in for the API port, per service too.
  EXPECT_EQ(worker::testing::CheckHealth(health_address, "tandem.v1.Worker"), Health::kServing);
  EXPECT_EQ(worker::testing::CheckHealth(health_address, "tandem.v1.Tandem"),
            Health::kUnknownService);
  // The health port serves nothing else; the API port still requires the certificate.
  auto stats = e2e::WorkerStatsOf(health_address);
  EXPECT_FALSE(stats.ok());
  EXPECT_EQ(worker::testing::CheckHealth(absl::StrCat("127.0.0.1:", port)), Health::kUnreachable);
  (*worker)->Signal(SIGTERM);
  EXPECT_EQ((*worker)->Wait(absl::Seconds(30)), 0) << (*worker)->LogTail();
}

}  // namespace
}  // namespace tandem::security
