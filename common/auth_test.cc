// Bearer tokens: loading and validation, constant-time comparison, the verifier on
// metadata, and a real server/client pair where a protected service answers
// UNAUTHENTICATED without the token while health stays open.
#include "common/auth.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "common/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tandem/v1/rendezvous.grpc.pb.h"

namespace tandem {
namespace {

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/" + name;
}

TEST(ConstantTimeEqualsTest, ComparesLikeOperatorEquals) {
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"", ""},
      {"a", ""},
      {"", "a"},
      {"abc", "abc"},
      {"abc", "abd"},
      {"abc", "abcd"},
      {"abcd", "abc"},
      {"xbc", "abc"},
      {std::string("a\0b", 3), std::string("a\0c", 3)},
      {"secret", "secret"}};
  for (const auto& [a, b] : pairs) {
    EXPECT_EQ(ConstantTimeEquals(a, b), a == b) << "'" << a << "' vs '" << b << "'";
  }
}

TEST(TokenTest, FormIsChecked) {
  EXPECT_TRUE(ValidateToken("s3cr3t-token_.~+/=", "t").ok());
  EXPECT_FALSE(ValidateToken("", "t").ok());
  EXPECT_FALSE(ValidateToken("with space", "t").ok());
  EXPECT_FALSE(ValidateToken("tab\there", "t").ok());
  EXPECT_FALSE(ValidateToken("caf\xc3\xa9", "t").ok());
  EXPECT_FALSE(ValidateToken(std::string(5000, 'x'), "t").ok());
  EXPECT_TRUE(absl::StrContains(ValidateToken("", "--auth_token_file=/x").message(),
                                "--auth_token_file=/x"));
}

TEST(TokenTest, FileAndEnvironment) {
  const std::string path = TempPath("token.txt");
  std::ofstream(path) << "  abc123\n";
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc123");
  EXPECT_FALSE(ReadTokenFile(TempPath("missing-token")).ok());
  std::ofstream(TempPath("empty-token")) << "\n";
  EXPECT_FALSE(ReadTokenFile(TempPath("empty-token")).ok());

  setenv("TANDEM_TEST_TOKEN", "xyz", 1);
  auto env = ReadTokenEnv("TANDEM_TEST_TOKEN");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(*env, "xyz");
  unsetenv("TANDEM_TEST_TOKEN_UNSET");
  EXPECT_EQ(ReadTokenEnv("TANDEM_TEST_TOKEN_UNSET").status().code(), absl::StatusCode::kNotFound);

  EXPECT_EQ(*TokenFromFlags("", "", "--f", "--e"), "");
  EXPECT_EQ(*TokenFromFlags(path, "", "--f", "--e"), "abc123");
  EXPECT_EQ(*TokenFromFlags("", "TANDEM_TEST_TOKEN", "--f", "--e"), "xyz");
  auto both = TokenFromFlags(path, "TANDEM_TEST_TOKEN", "--f", "--e");
  EXPECT_FALSE(both.ok());
  auto unset = TokenFromFlags("", "TANDEM_TEST_TOKEN_UNSET", "--f", "--e");
  ASSERT_FALSE(unset.ok());
  EXPECT_TRUE(absl::StrContains(unset.status().message(), "--e=TANDEM_TEST_TOKEN_UNSET"));
}

using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

TEST(BearerTokenVerifierTest, ChecksTheAuthorizationHeader) {
  const BearerTokenVerifier disabled;
  EXPECT_TRUE(disabled.Check(Metadata{}).ok());
  const BearerTokenVerifier v("tok");
  struct Case {
    const char* name;
    std::vector<std::string> headers;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"none", {}, false},
      {"right", {"Bearer tok"}, true},
      {"scheme in lower case", {"bearer tok"}, true},
      {"wrong token", {"Bearer tak"}, false},
      {"prefix of the token", {"Bearer to"}, false},
      {"token plus more", {"Bearer tokk"}, false},
      {"no scheme", {"tok"}, false},
      {"basic scheme", {"Basic tok"}, false},
      {"empty", {""}, false},
      {"two headers", {"Bearer tok", "Bearer tok"}, false},
  };
  for (const Case& c : cases) {
    Metadata md;
    for (const std::string& h : c.headers) md.insert({kAuthorizationKey, h});
    absl::Status s = v.Check(md);
    EXPECT_EQ(s.ok(), c.ok) << c.name << ": " << s;
    if (!c.ok) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << c.name;
      EXPECT_FALSE(absl::StrContains(s.message(), "tak")) << "echoes the offered token";
    }
  }
}

// A protected service: Set succeeds only with the token.
class ProtectedStore final : public v1::Rendezvous::Service {
 public:
  explicit ProtectedStore(const BearerTokenVerifier* v) : verifier_(v) {}
  grpc::Status Set(grpc::ServerContext* context, const v1::SetRequest*, v1::SetResponse*) override {
    return verifier_->Check(*context);
  }

 private:
  const BearerTokenVerifier* verifier_;
};

grpc::StatusCode CallSet(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::Rendezvous::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::SetRequest request;
  request.set_key("k");
  v1::SetResponse response;
  return stub->Set(&ctx, request, &response).error_code();
}

TEST(BearerTokenVerifierTest, RealCallsNeedTheTokenButHealthDoesNot) {
  const BearerTokenVerifier verifier("right-token");
  ProtectedStore service(&verifier);
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->SetServing(true);
  const std::string address = (*server)->address();
  const auto plain = grpc::InsecureChannelCredentials();
  const grpc::ChannelArguments args;

  EXPECT_EQ(CallSet(CreateChannelWithToken(address, plain, args, "right-token")),
            grpc::StatusCode::OK);
  EXPECT_EQ(CallSet(CreateChannelWithToken(address, plain, args, "")),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CallSet(CreateChannelWithToken(address, plain, args, "wrong-token")),
            grpc::StatusCode::UNAUTHENTICATED);

  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, plain));
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_TRUE(health->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace tandem
