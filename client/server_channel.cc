#include "client/server_channel.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_replace.h"
#include "common/auth.h"
#include "common/tls.h"

ABSL_FLAG(bool, tls, false, "Connect with TLS.");
ABSL_FLAG(std::string, tls_ca, "", "CA bundle for the server's certificate.");
ABSL_FLAG(std::string, tls_cert, "", "Client certificate (mutual TLS).");
ABSL_FLAG(std::string, tls_key, "", "Client private key.");
ABSL_FLAG(std::string, tls_server_name, "", "Name expected in the server's certificate.");
ABSL_FLAG(std::string, token_file, "", "Bearer token file.");
ABSL_FLAG(std::string, token_env, "", "Environment variable holding the bearer token.");

namespace tandem::client {

absl::StatusOr<std::shared_ptr<grpc::Channel>> ServerChannel(const std::string& server) {
  TlsFiles tls{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
               absl::GetFlag(FLAGS_tls_ca), "tls"};
  tls.client_tls = absl::GetFlag(FLAGS_tls);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(tls);
  if (!credentials.ok()) {
    // The CLI spells its flags with dashes.
    return absl::Status(
        credentials.status().code(),
        absl::StrReplaceAll(credentials.status().message(), {{"--tls_", "--tls-"}}));
  }
  absl::StatusOr<std::string> token =
      TokenFromFlags(absl::GetFlag(FLAGS_token_file), absl::GetFlag(FLAGS_token_env),
                     "--token-file", "--token-env");
  if (!token.ok()) return token.status();
  grpc::ChannelArguments args;
  if (!absl::GetFlag(FLAGS_tls_server_name).empty()) {
    args.SetSslTargetNameOverride(absl::GetFlag(FLAGS_tls_server_name));
  }
  return CreateChannelWithToken(server, *credentials, args, *token);
}

std::vector<CommandFlag> ConnectionFlags() {
  return {
      {"tls", "",
       "Use TLS; the server's certificate is checked against the system's root "
       "certificates unless --tls-ca is given."},
      {"tls_ca", "FILE", "PEM CA bundle the server's certificate must chain to (implies --tls)."},
      {"tls_cert", "FILE", "PEM client certificate, for servers that require one (mutual TLS)."},
      {"tls_key", "FILE", "PEM private key of --tls-cert."},
      {"tls_server_name", "NAME",
       "Name to verify in the server's certificate instead of the "
       "host of --server."},
      {"token_file", "FILE", "Send the bearer token in FILE with every call."},
      {"token_env", "NAME", "Send the bearer token held in environment variable NAME."},
  };
}

}  // namespace tandem::client
