// Throwaway certificates for TLS tests, made with the `openssl` command at test time
// (EC P-256 keys, valid for two days): a CA, leaf certificates it signs for
// 127.0.0.1/localhost usable as server and client certificates, and a second,
// unrelated CA with its own leaf (the "wrong CA" of negative tests).
#ifndef TANDEM_TESTS_SECURITY_TEST_CERTS_H_
#define TANDEM_TESTS_SECURITY_TEST_CERTS_H_

#include <string>

#include "absl/status/statusor.h"

namespace tandem::testing {

// Paths of one PEM certificate and its key.
struct CertPair {
  std::string cert;
  std::string key;
};

struct TestPki {
  std::string dir;       // Where the files are.
  std::string ca;        // CA certificate.
  CertPair server;       // Leaf for the servers (coordinator public port, workers).
  CertPair coordinator;  // Leaf the coordinator presents to the workers.
  CertPair client;       // Leaf of a public API client.
  std::string other_ca;  // An unrelated CA.
  CertPair other;        // Leaf signed by other_ca (same names as `server`).
  CertPair expired;      // Leaf signed by `ca` whose validity ended at creation.
};

// Writes a fresh PKI into `dir` (created if missing). INTERNAL with openssl's output
// when a command fails.
absl::StatusOr<TestPki> MakeTestPki(const std::string& dir);

// Reads a whole file ("" when it cannot be read).
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_SECURITY_TEST_CERTS_H_
