#include "common/auth.h"

#include <grpcpp/support/client_interceptor.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace tandem {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

// Adds the authorization header to every call of the channel.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(std::string header) : header_(std::move(header)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kAuthorizationKey, header_});
    }
    methods->Proceed();
  }

 private:
  const std::string header_;
};

class TokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : header_(absl::StrCat(kBearerPrefix, token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::Status ValidateToken(absl::string_view token, absl::string_view source) {
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the token is empty"));
  }
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the token is ", token.size(), " bytes; at most ", kMaxTokenBytes));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c <= 0x20 || c >= 0x7F) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": byte ", i,
                       " of the token is not printable ASCII (spaces and control characters "
                       "cannot travel in a header)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read the token file (", std::strerror(errno), ")"));
  }
  std::string data;
  data.resize(kMaxTokenBytes + 2);
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<size_t>(in.gcount()));
  std::string token(absl::StripAsciiWhitespace(data));
  if (absl::Status s = ValidateToken(token, path); !s.ok()) return s;
  return token;
}

absl::StatusOr<std::string> ReadTokenEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) {
    return absl::NotFoundError(absl::StrCat("environment variable ", name, " is not set"));
  }
  std::string token(absl::StripAsciiWhitespace(value));
  if (absl::Status s = ValidateToken(token, absl::StrCat("environment variable ", name)); !s.ok()) {
    return s;
  }
  return token;
}

absl::StatusOr<std::string> TokenFromFlags(const std::string& file, const std::string& env,
                                           absl::string_view file_flag,
                                           absl::string_view env_flag) {
  if (!file.empty() && !env.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("set at most one of ", file_flag, " and ", env_flag));
  }
  if (!file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(file);
    if (!token.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file_flag, "=", token.status().message()));
    }
    return token;
  }
  if (!env.empty()) {
    absl::StatusOr<std::string> token = ReadTokenEnv(env);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(env_flag, "=", env, ": ", token.status().message()));
    }
    return token;
  }
  return std::string();
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Walks all of `b` whatever `a` holds; the lengths are folded into the result.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

absl::Status BearerTokenVerifier::Check(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  std::vector<absl::string_view> values;
  auto range = metadata.equal_range(kAuthorizationKey);
  for (auto it = range.first; it != range.second; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  return CheckAuthorization(values);
}

absl::Status BearerTokenVerifier::CheckAuthorization(
    const std::vector<absl::string_view>& values) const {
  if (!enabled()) return absl::OkStatus();
  if (values.empty()) {
    return absl::UnauthenticatedError(
        "missing credentials: this server requires the metadata 'authorization: Bearer "
        "<token>'");
  }
  bool match = false;
  for (absl::string_view value : values) {
    constexpr size_t kPrefix = sizeof(kBearerPrefix) - 1;
    if (value.size() < kPrefix ||
        !absl::EqualsIgnoreCase(value.substr(0, kPrefix), kBearerPrefix)) {
      continue;
    }
    match |= ConstantTimeEquals(value.substr(kPrefix), token_);
  }
  if (values.size() > 1) {
    return absl::UnauthenticatedError("several authorization headers; send exactly one");
  }
  if (!match) return absl::UnauthenticatedError("invalid bearer token");
  return absl::OkStatus();
}

grpc::Status BearerTokenVerifier::Check(const grpc::ServerContext& context) const {
  if (!enabled()) return grpc::Status::OK;
  return ToGrpcStatus(Check(context.client_metadata()));
}

std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& token) {
  if (token.empty()) return grpc::CreateCustomChannel(address, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<TokenInterceptorFactory>(token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(factories));
}

}  // namespace tandem
