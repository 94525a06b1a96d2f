// Bearer-token authentication of Tandem's public API.
//
// The server holds one shared secret (from a file or an environment variable); every
// call of a protected service must carry the gRPC metadata
//   authorization: Bearer <token>
// and is answered UNAUTHENTICATED otherwise. The comparison takes the same time
// whatever the offered token (no early exit on the first differing byte). The standard
// health and reflection services are not protected: probes need no secret.
//
// Clients attach the token with a channel interceptor (CreateChannelWithToken), which
// works over TLS and, inside a trusted network, over plaintext.
#ifndef TANDEM_COMMON_AUTH_H_
#define TANDEM_COMMON_AUTH_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem {

// The metadata key (gRPC keys are lower case) and the scheme.
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// Checks a token's form: 1..4096 bytes of printable ASCII without spaces (it travels in
// an HTTP/2 header). INVALID_ARGUMENT naming `source` otherwise.
absl::Status ValidateToken(absl::string_view token, absl::string_view source);

// Reads a token from `path` (surrounding whitespace and a trailing newline removed).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Reads a token from the environment variable `name`; NOT_FOUND when it is unset.
absl::StatusOr<std::string> ReadTokenEnv(const std::string& name);

// Resolves the token of a server or client from its two flags: a file path and the
// name of an environment variable; at most one may be set. "" (no token, no
// authentication) when both are empty. `file_flag` and `env_flag` name the flags in
// error messages.
absl::StatusOr<std::string> TokenFromFlags(const std::string& file, const std::string& env,
                                           absl::string_view file_flag, absl::string_view env_flag);

// a == b, in time that depends on the lengths only, not on where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Server side. An empty token disables authentication (every call passes).
class BearerTokenVerifier {
 public:
  BearerTokenVerifier() = default;
  explicit BearerTokenVerifier(std::string token) : token_(std::move(token)) {}

  bool enabled() const { return !token_.empty(); }

  // OK when disabled or when `metadata` carries "authorization: Bearer <token>";
  // UNAUTHENTICATED (the message never repeats what was offered) otherwise.
  absl::Status Check(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  // Same, on the values of every authorization header of an HTTP request (the
  // OpenAI-compatible API).
  absl::Status CheckAuthorization(const std::vector<absl::string_view>& values) const;
  // Same, on a call's client metadata.
  grpc::Status Check(const grpc::ServerContext& context) const;

 private:
  std::string token_;
};

// A channel to `address` whose every call carries `token` (none when empty).
std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& token);

}  // namespace tandem

#endif  // TANDEM_COMMON_AUTH_H_
