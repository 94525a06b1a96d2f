#include "tests/security/test_certs.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::testing {
namespace {

// Runs a shell command with its output in `log`; INTERNAL with the output on failure.
absl::Status Run(const std::string& command, const std::string& log) {
  const std::string full = absl::StrCat(command, " >>", log, " 2>&1");
  const int rc = std::system(full.c_str());
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("`", command, "` failed (", rc, "): ", ReadFileOrEmpty(log)));
  }
  return absl::OkStatus();
}

constexpr char kKeyOptions[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

absl::Status MakeCa(const std::string& dir, const std::string& name, const std::string& log) {
  return Run(absl::StrCat("openssl req -x509 ", kKeyOptions, " -keyout ", dir, "/", name,
                          ".key -out ", dir, "/", name, ".pem -days 2 -subj '/CN=", name,
                          "' -addext basicConstraints=critical,CA:TRUE",
                          " -addext keyUsage=critical,keyCertSign,cRLSign"),
             log);
}

absl::StatusOr<CertPair> MakeLeaf(const std::string& dir, const std::string& ca,
                                  const std::string& name, int days, const std::string& log) {
  CertPair pair{absl::StrCat(dir, "/", name, ".pem"), absl::StrCat(dir, "/", name, ".key")};
  const std::string csr = absl::StrCat(dir, "/", name, ".csr");
  const std::string ext = absl::StrCat(dir, "/", name, ".ext");
  {
    std::ofstream out(ext);
    out << "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
           "basicConstraints=CA:FALSE\n"
           "keyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=serverAuth,clientAuth\n";
  }
  absl::Status s = Run(absl::StrCat("openssl req ", kKeyOptions, " -keyout ", pair.key, " -out ",
                                    csr, " -subj '/CN=", name, "'"),
                       log);
  if (!s.ok()) return s;
  s = Run(
      absl::StrCat("openssl x509 -req -in ", csr, " -CA ", dir, "/", ca, ".pem -CAkey ", dir, "/",
                   ca, ".key -CAcreateserial -out ", pair.cert, " -days ", days, " -extfile ", ext),
      log);
  if (!s.ok()) return s;
  return pair;
}

}  // namespace

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<TestPki> MakeTestPki(const std::string& dir) {
  mkdir(dir.c_str(), 0700);
  const std::string log = dir + "/openssl.log";
  TestPki pki;
  pki.dir = dir;
  if (absl::Status s = MakeCa(dir, "ca", log); !s.ok()) return s;
  if (absl::Status s = MakeCa(dir, "other_ca", log); !s.ok()) return s;
  pki.ca = dir + "/ca.pem";
  pki.other_ca = dir + "/other_ca.pem";
  struct Leaf {
    const char* ca;
    const char* name;
    int days;
    CertPair* out;
  };
  for (const Leaf& leaf :
       {Leaf{"ca", "server", 2, &pki.server}, Leaf{"ca", "coordinator", 2, &pki.coordinator},
        Leaf{"ca", "client", 2, &pki.client}, Leaf{"other_ca", "other", 2, &pki.other},
        Leaf{"ca", "expired", 0, &pki.expired}}) {
    absl::StatusOr<CertPair> pair = MakeLeaf(dir, leaf.ca, leaf.name, leaf.days, log);
    if (!pair.ok()) return pair.status();
    *leaf.out = *pair;
  }
  return pki;
}

}  // namespace tandem::testing
