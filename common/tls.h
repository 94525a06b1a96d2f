// TLS and mutual TLS for Tandem's gRPC servers and clients, from PEM files named by
// flags. The files are read and checked once, at start-up, so that a bad path, a
// malformed PEM file or a key that does not belong to its certificate fails with one
// clear message instead of a refused handshake later.
//
//   server: cert + key          -> TLS
//           cert + key + ca     -> mutual TLS: every client must present a certificate
//                                  signed by `ca` (others are refused in the handshake)
//   client: ca                  -> TLS, the server's certificate verified against `ca`
//           (nothing but tls)   -> TLS, verified against the system's root certificates
//           ca + cert + key     -> mutual TLS: this client presents `cert`
// All paths empty (and tls off for a client): plaintext.
#ifndef TANDEM_COMMON_TLS_H_
#define TANDEM_COMMON_TLS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {

// Paths of PEM files. `flag_prefix` names the flags in error messages, e.g. "tls"
// gives "--tls_cert", "worker_tls" gives "--worker_tls_cert".
struct TlsFiles {
  std::string cert;  // Certificate chain (leaf first).
  std::string key;   // Private key of the leaf certificate.
  std::string ca;    // CA certificate(s) that the peer's certificate must chain to.
  std::string flag_prefix = "tls";
  // Clients only: use TLS even when `ca` is empty (system root certificates).
  bool client_tls = false;
};

// PEM contents, checked: the certificate and the key parse and match, the CA bundle
// holds at least one certificate.
struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
};

// True when `files` asks for TLS on a server (a certificate or a key is given).
bool ServerTlsEnabled(const TlsFiles& files);
// True when `files` asks for TLS on a client.
bool ClientTlsEnabled(const TlsFiles& files);

// Reads and checks the files. INVALID_ARGUMENT (message names the flag and the path)
// when: only one of cert/key is given; a file cannot be read or is not PEM of the
// expected kind; the key does not belong to the certificate; `require_cert` and no
// certificate is given.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, bool require_cert);

// Server credentials: plaintext (grpc::InsecureServerCredentials) when no cert/key is
// given; TLS; or mutual TLS when `ca` is given (client certificate required and
// verified). A ca without cert/key is INVALID_ARGUMENT.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// Channel credentials: plaintext when ClientTlsEnabled is false; otherwise TLS with
// `ca` (or the system roots) and, when cert and key are given, a client certificate.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files);

}  // namespace tandem

#endif  // TANDEM_COMMON_TLS_H_
