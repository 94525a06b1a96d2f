// TLS material loading (clear start-up errors) and real TLS / mutual TLS handshakes
// between an in-process GrpcServer and clients, with certificates made by openssl.
#include "common/tls.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/security/test_certs.h"

namespace tandem {
namespace {

using ::tandem::testing::TestPki;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    auto pki = ::tandem::testing::MakeTestPki(std::string(tmp ? tmp : "/tmp") + "/tls_test_pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new TestPki(*pki);
  }
  static void TearDownTestSuite() { delete pki_; }

  static TlsFiles Server(bool mutual) {
    TlsFiles f{pki_->server.cert, pki_->server.key, mutual ? pki_->ca : ""};
    return f;
  }

  static std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = pki_->dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  static TestPki* pki_;
};
TestPki* TlsTest::pki_ = nullptr;

// ---- loading ----

TEST_F(TlsTest, LoadsAMatchingCertificateKeyAndCa) {
  auto m = LoadTlsMaterial(Server(true), true);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(absl::StrContains(m->cert_pem, "BEGIN CERTIFICATE"));
  EXPECT_TRUE(absl::StrContains(m->key_pem, "PRIVATE KEY"));
  EXPECT_TRUE(absl::StrContains(m->ca_pem, "BEGIN CERTIFICATE"));
}

TEST_F(TlsTest, BadMaterialFailsWithAMessageNamingFlagAndFile) {
  const std::string text = WriteFile("not_pem.txt", "hello\n");
  struct Case {
    const char* name;
    TlsFiles files;
    bool require_cert;
    std::vector<std::string> words;  // Each must appear in the message.
  };
  const std::vector<Case> cases = {
      {"cert without key",
       {pki_->server.cert, "", "", "worker_tls"},
       false,
       {"--worker_tls_cert", "--worker_tls_key"}},
      {"key without cert", {"", pki_->server.key, ""}, false, {"--tls_key", "--tls_cert"}},
      {"ca without cert on a server", {"", "", pki_->ca}, true, {"--tls_ca", "--tls_cert"}},
      {"missing cert file",
       {"/nonexistent/c.pem", pki_->server.key, ""},
       false,
       {"--tls_cert=/nonexistent/c.pem", "cannot read"}},
      {"missing ca file",
       {"", "", "/nonexistent/ca.pem"},
       false,
       {"--tls_ca=/nonexistent/ca.pem", "cannot read"}},
      {"cert is not PEM", {text, pki_->server.key, ""}, false, {"--tls_cert", "no PEM"}},
      {"ca is not PEM", {"", "", text}, false, {"--tls_ca", "no PEM"}},
      {"key is not PEM", {pki_->server.cert, text, ""}, false, {"--tls_key", "private key"}},
      {"key of another certificate",
       {pki_->server.cert, pki_->client.key, ""},
       false,
       {"--tls_key", "is not the private key of the certificate"}},
  };
  for (const Case& c : cases) {
    auto m = LoadTlsMaterial(c.files, c.require_cert);
    ASSERT_FALSE(m.ok()) << c.name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    for (const std::string& w : c.words) {
      EXPECT_TRUE(absl::StrContains(m.status().message(), w))
          << c.name << ": '" << w << "' not in: " << m.status().message();
    }
  }
}

TEST_F(TlsTest, ExpiredCertificateIsRefused) {
  absl::SleepFor(absl::Milliseconds(1100));  // Its validity ended when it was made.
  auto m = LoadTlsMaterial({pki_->expired.cert, pki_->expired.key, ""}, true);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "expired")) << m.status();
}

TEST_F(TlsTest, NoFilesMeansPlaintext) {
  EXPECT_FALSE(ServerTlsEnabled(TlsFiles{}));
  EXPECT_FALSE(ClientTlsEnabled(TlsFiles{}));
  TlsFiles system_roots;
  system_roots.client_tls = true;
  EXPECT_TRUE(ClientTlsEnabled(system_roots));
  EXPECT_TRUE(MakeServerCredentials(TlsFiles{}).ok());
  EXPECT_TRUE(MakeChannelCredentials(TlsFiles{}).ok());
  EXPECT_FALSE(MakeServerCredentials({"", "", pki_->ca}).ok());
}

// ---- handshakes ----

// Health check through `credentials`; the status code of the call.
grpc::StatusCode Probe(int port, const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), credentials);
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse response;
  return stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &response).error_code();
}

std::unique_ptr<GrpcServer> StartServer(const TlsFiles& files) {
  auto credentials = MakeServerCredentials(files);
  EXPECT_TRUE(credentials.ok()) << credentials.status();
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.credentials = *credentials;
  auto server = GrpcServer::Start(options, {});
  EXPECT_TRUE(server.ok()) << server.status();
  (*server)->SetServing(true);
  return *std::move(server);
}

std::shared_ptr<grpc::ChannelCredentials> Client(const TlsFiles& files) {
  auto credentials = MakeChannelCredentials(files);
  EXPECT_TRUE(credentials.ok()) << credentials.status();
  return *credentials;
}

TEST_F(TlsTest, TlsServerServesTlsClientsAndRefusesPlaintextAndWrongCa) {
  auto server = StartServer(Server(false));
  const int port = server->port();
  EXPECT_EQ(Probe(port, Client({"", "", pki_->ca})), grpc::StatusCode::OK);
  EXPECT_EQ(Probe(port, grpc::InsecureChannelCredentials()), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Probe(port, Client({"", "", pki_->other_ca})), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateSignedByTheCa) {
  auto server = StartServer(Server(true));
  const int port = server->port();
  EXPECT_EQ(Probe(port, Client({pki_->coordinator.cert, pki_->coordinator.key, pki_->ca})),
            grpc::StatusCode::OK);
  // No client certificate.
  EXPECT_EQ(Probe(port, Client({"", "", pki_->ca})), grpc::StatusCode::UNAVAILABLE);
  // A client certificate from another CA.
  EXPECT_EQ(Probe(port, Client({pki_->other.cert, pki_->other.key, pki_->ca})),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Probe(port, grpc::InsecureChannelCredentials()), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, PlaintextServerRefusesTlsClients) {
  auto server = StartServer(TlsFiles{});
  EXPECT_EQ(Probe(server->port(), grpc::InsecureChannelCredentials()), grpc::StatusCode::OK);
  EXPECT_EQ(Probe(server->port(), Client({"", "", pki_->ca})), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace tandem
