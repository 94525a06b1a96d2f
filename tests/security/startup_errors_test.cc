// Start-up errors of the real binaries: each bad configuration stops the process with
// one line on stderr that names the problem, and a non-zero exit code (2 for a bad
// flag or file, 1 when the workers cannot be reached in time).
//  * tandem-coordinator: missing flags, bad --tokenizer, TLS and token files, message
//    limits, workers unreachable within --worker_wait_s.
//  * tandem-worker: TLS files, message limit, bad model directories (truncated
//    weights, wrong dtype, shapes that disagree with config.json, broken config.json).
//    (More flag and model-directory cases: worker/worker_binary_test.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/security/test_certs.h"
#include "worker/process_test_util.h"

namespace tandem::security {
namespace {

using ::tandem::testing::ReadFileOrEmpty;
using worker::testing::ChildProcess;
using worker::testing::TestTempDir;

std::string CoordinatorBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/tandem/coordinator/tandem-coordinator");
}

struct BadStart {
  std::vector<std::string> args;
  int exit_code;
  std::string expected;  // Substring of the one error line.
};

// Runs `binary` with each case's flags; expects its exit code and exactly one line of
// output starting with "`prefix`".
void ExpectBadStarts(const std::string& binary, const std::string& prefix,
                     const std::vector<BadStart>& cases, const std::string& tag) {
  int n = 0;
  for (const BadStart& c : cases) {
    SCOPED_TRACE(c.expected);
    const std::string log = absl::StrCat(TestTempDir(), "/", tag, "-", n++, ".log");
    const absl::Time start = absl::Now();
    auto process = ChildProcess::Start(binary, c.args, log);
    ASSERT_TRUE(process.ok()) << process.status();
    EXPECT_EQ((*process)->Wait(absl::Seconds(30)), c.exit_code);
    EXPECT_LT(absl::Now() - start, absl::Seconds(20));
    const std::string output = ReadFileOrEmpty(log);
    EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
    EXPECT_TRUE(absl::StartsWith(output, prefix)) << output;
    EXPECT_TRUE(absl::StrContains(output, c.expected))
        << "want '" << c.expected << "' in " << output;
  }
}

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A copy of models/target in `dir` with `edit` applied to the named file's bytes.
std::string BrokenModel(const std::string& name, const std::string& file,
                        const std::function<std::string(std::string)>& edit) {
  const std::string dir = absl::StrCat(TestTempDir(), "/", name);
  // -L: real copies, never links into the source tree.
  EXPECT_EQ(std::system(absl::StrCat("rm -rf ", dir, " && cp -rL models/target ", dir).c_str()), 0);
  const std::string path = dir + "/" + file;
  const std::string bytes = ReadFileOrEmpty(path);
  std::remove(path.c_str());
  WriteFile(path, edit(bytes));
  return dir;
}

class StartupErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pki = ::tandem::testing::MakeTestPki(TestTempDir() + "/startup_pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new ::tandem::testing::TestPki(*pki);
  }
  static void TearDownTestSuite() { delete pki_; }
  static ::tandem::testing::TestPki* pki_;
};
::tandem::testing::TestPki* StartupErrorsTest::pki_ = nullptr;

TEST_F(StartupErrorsTest, CoordinatorStopsWithOneClearLine) {
  const std::string bad_tokenizer = absl::StrCat(TestTempDir(), "/bad-tokenizer");
  EXPECT_EQ(std::system(absl::StrCat("mkdir -p ", bad_tokenizer).c_str()), 0);
  WriteFile(bad_tokenizer + "/tokenizer.model", "this is not a sentencepiece model");
  const std::string token_file = WriteFile(TestTempDir() + "/token", "s3cret\n");
  const std::vector<std::string> base = {"--target=127.0.0.1:1", "--tokenizer=models/target"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  unsetenv("TANDEM_STARTUP_TEST_UNSET");
  const std::vector<BadStart> cases = {
      {{}, 2, "--target and --tokenizer are required"},
      {{"--target=127.0.0.1:1", "--tokenizer=/nonexistent/model"}, 2, "/nonexistent/model"},
      {{"--target=127.0.0.1:1", "--tokenizer=" + bad_tokenizer}, 2, bad_tokenizer},
      {with({"--no_such_flag=1"}), 1, "no_such_flag"},
      {with({"--tls_cert=/nonexistent/c.pem", "--tls_key=/nonexistent/k.pem"}), 2,
       "--tls_cert=/nonexistent/c.pem: cannot read"},
      {with({"--tls_cert=" + pki_->server.cert}), 2, "--tls_key"},
      {with({"--tls_ca=" + pki_->ca}), 2, "--tls_cert"},
      {with({"--tls_cert=" + pki_->server.cert, "--tls_key=" + pki_->client.key}), 2,
       "is not the private key of the certificate"},
      {with({"--tls_cert=" + pki_->server.cert, "--tls_key=" + pki_->server.key,
             "--tls_ca=" + token_file}),
       2, "--tls_ca"},
      {with({"--worker_tls_key=" + pki_->coordinator.key}), 2, "--worker_tls_cert"},
      {with({"--worker_tls_ca=" + pki_->ca, "--rendezvous_listen=127.0.0.1:0"}), 2,
       "the rendezvous service needs --worker_tls_cert"},
      {with({"--auth_token_file=/nonexistent/token"}), 2, "--auth_token_file"},
      {with({"--auth_token_env=TANDEM_STARTUP_TEST_UNSET"}), 2,
       "TANDEM_STARTUP_TEST_UNSET is not set"},
      {with({"--auth_token_file=" + token_file, "--auth_token_env=HOME"}), 2, "at most one"},
      {with({"--max_message_bytes=10"}), 2, "--max_message_bytes"},
      {with({"--worker_max_message_bytes=0"}), 2, "--worker_max_message_bytes"},
      {with({"--worker_wait_s=1"}), 1, "target worker 127.0.0.1:1 not ready"},
  };
  ExpectBadStarts(CoordinatorBinary(), "", cases, "coordinator-bad-start");
}

TEST_F(StartupErrorsTest, WorkerStopsWithOneClearLine) {
  const std::string model = "--model_dir=models/target";
  const std::string truncated = BrokenModel(
      "truncated", "model.safetensors", [](std::string b) { return b.substr(0, b.size() / 2); });
  const std::string wrong_dtype =
      BrokenModel("wrong-dtype", "model.safetensors", [](std::string b) {
        const size_t at = b.find("\"F32\"");
        if (at != std::string::npos) b.replace(at, 5, "\"I32\"");
        return b;
      });
  const std::string wrong_shape = BrokenModel("wrong-shape", "config.json", [](std::string b) {
    return absl::StrReplaceAll(b, {{"\"intermediate_size\": ", "\"intermediate_size\": 1"}});
  });
  const std::string broken_json = BrokenModel(
      "broken-json", "config.json", [](std::string b) { return b.substr(0, b.size() / 2); });
  const std::vector<BadStart> cases = {
      {{model, "--tls_cert=" + pki_->server.cert}, 2, "--tls_key"},
      {{model, "--tls_cert=/nonexistent/s.pem", "--tls_key=/nonexistent/s.key"},
       2,
       "--tls_cert=/nonexistent/s.pem: cannot read"},
      {{model, "--tls_ca=" + pki_->ca}, 2, "--tls_cert"},
      {{model, "--tls_cert=" + pki_->server.cert, "--tls_key=" + pki_->other.key},
       2,
       "is not the private key"},
      {{model, "--max_message_bytes=5"}, 2, "--max_message_bytes"},
      {{"--model_dir=" + truncated}, 2, truncated},
      {{"--model_dir=" + wrong_dtype}, 2, wrong_dtype},
      {{"--model_dir=" + wrong_shape}, 2, wrong_shape},
      {{"--model_dir=" + broken_json}, 2, "config.json"},
  };
  ExpectBadStarts(worker::testing::WorkerBinary(), "tandem-worker: ", cases, "worker-bad-start");
}

}  // namespace
}  // namespace tandem::security
