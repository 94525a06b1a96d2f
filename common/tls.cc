#include "common/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

std::string Flag(const TlsFiles& files, const char* name) {
  return absl::StrCat("--", files.flag_prefix, "_", name);
}

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": cannot read (", std::strerror(errno), ")"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string data = buffer.str();
  if (data.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": ", data.size(),
                                                   " bytes; a PEM file over ", kMaxPemBytes,
                                                   " bytes is not a certificate or key"));
  }
  return data;
}

// The oldest OpenSSL error, as text; clears the queue.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM block found";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Parses every certificate of a PEM bundle; the first one is returned in `first`.
absl::Status ParseCertificates(const std::string& flag, const std::string& path,
                               const std::string& pem, X509Ptr* first) {
  BioPtr bio = MemoryBio(pem);
  int count = 0;
  for (;;) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    if (count == 0 && first != nullptr) *first = std::move(cert);
    ++count;
  }
  ERR_clear_error();  // End of the bundle reads as an error.
  if (count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", path, ": no PEM certificate (-----BEGIN CERTIFICATE-----) in the file"));
  }
  return absl::OkStatus();
}

absl::Status CheckValidity(const std::string& flag, const std::string& path, X509* cert) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": the certificate has expired"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": the certificate is not valid yet"));
  }
  return absl::OkStatus();
}

}  // namespace

bool ServerTlsEnabled(const TlsFiles& files) { return !files.cert.empty() || !files.key.empty(); }

bool ClientTlsEnabled(const TlsFiles& files) {
  return files.client_tls || !files.ca.empty() || !files.cert.empty() || !files.key.empty();
}

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, bool require_cert) {
  const std::string cert_flag = Flag(files, "cert");
  const std::string key_flag = Flag(files, "key");
  const std::string ca_flag = Flag(files, "ca");
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(files.cert.empty() ? key_flag : cert_flag, " is set but ",
                     files.cert.empty() ? cert_flag : key_flag, " is not; give both or neither"));
  }
  if (require_cert && files.cert.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ca_flag, " is set but ", cert_flag, " and ", key_flag,
                     " are not; a TLS server needs its own certificate and key"));
  }
  TlsMaterial m;
  if (!files.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(cert_flag, files.cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadFile(key_flag, files.key);
    if (!key.ok()) return key.status();
    X509Ptr leaf;
    if (absl::Status s = ParseCertificates(cert_flag, files.cert, *cert, &leaf); !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckValidity(cert_flag, files.cert, leaf.get()); !s.ok()) return s;
    BioPtr key_bio = MemoryBio(*key);
    KeyPtr pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
    if (pkey == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          key_flag, "=", files.key, ": not an unencrypted PEM private key (", OpenSslError(), ")"));
    }
    if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat(key_flag, "=", files.key,
                                                     " is not the private key of the certificate ",
                                                     cert_flag, "=", files.cert));
    }
    m.cert_pem = *std::move(cert);
    m.key_pem = *std::move(key);
  }
  if (!files.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(ca_flag, files.ca);
    if (!ca.ok()) return ca.status();
    if (absl::Status s = ParseCertificates(ca_flag, files.ca, *ca, nullptr); !s.ok()) return s;
    m.ca_pem = *std::move(ca);
  }
  return m;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (!ServerTlsEnabled(files)) {
    if (!files.ca.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Flag(files, "ca"), " is set but ", Flag(files, "cert"), " and ", Flag(files, "key"),
          " are not; a TLS server needs its own certificate and key"));
    }
    return grpc::InsecureServerCredentials();
  }
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(files, /*require_cert=*/true);
  if (!m.ok()) return m.status();
  grpc::SslServerCredentialsOptions options(
      m->ca_pem.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                        : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = m->ca_pem;
  options.pem_key_cert_pairs.push_back({m->key_pem, m->cert_pem});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files) {
  if (!ClientTlsEnabled(files)) return grpc::InsecureChannelCredentials();
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(files, /*require_cert=*/false);
  if (!m.ok()) return m.status();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = m->ca_pem;  // Empty: the system's roots.
  options.pem_private_key = m->key_pem;
  options.pem_cert_chain = m->cert_pem;
  return grpc::SslCredentials(options);
}

}  // namespace tandem
