// The channel every `tandem` subcommand that talks to a server uses: plaintext, TLS
// (--tls, --tls-ca) or mutual TLS (--tls-cert, --tls-key), with the bearer token of
// --token-file / --token-env attached to every call.
#ifndef TANDEM_CLIENT_SERVER_CHANNEL_H_
#define TANDEM_CLIENT_SERVER_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/command.h"

namespace tandem::client {

// A channel to `server` configured from the connection flags; INVALID_ARGUMENT (one
// line naming the flag) when a certificate, key or token cannot be used.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ServerChannel(const std::string& server);

// Help entries of the connection flags, for a subcommand's flag list.
std::vector<CommandFlag> ConnectionFlags();

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_SERVER_CHANNEL_H_
