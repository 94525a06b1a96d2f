#include "tests/e2e/cluster.h"

#include <grpcpp/grpcpp.h>

#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace tandem::e2e {

using worker::testing::ChildProcess;
using worker::testing::FreePort;
using worker::testing::Health;
using worker::testing::TestTempDir;
using worker::testing::WorkerGroup;

namespace {

std::string CoordinatorBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/tandem/coordinator/tandem-coordinator");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(const ClusterOptions& options) {
  std::unique_ptr<Cluster> c(new Cluster());
  c->options_ = options;
  auto target = WorkerGroup::Start(options.target_model, options.tp, options.tag + "-target",
                                   options.worker_flags);
  if (!target.ok()) return target.status();
  c->target_ = *std::move(target);
  if (options.with_draft) {
    std::vector<std::string> draft_flags = options.worker_flags;
    draft_flags.push_back("--role=draft");
    auto draft = WorkerGroup::Start(options.draft_model, 1, options.tag + "-draft", draft_flags);
    if (!draft.ok()) return draft.status();
    c->draft_ = *std::move(draft);
  }
  // A free port can be taken before the coordinator binds it (by an outgoing connection's
  // ephemeral port, e.g. between the ranks): then it exits at once and another port is
  // tried.
  absl::Status started;
  for (int attempt = 0; attempt < 3; ++attempt) {
    c->port_ = FreePort();
    c->coordinator_args_ = {
        absl::StrCat("--listen=127.0.0.1:", c->port_),
        "--target=" + c->target_->leader_address(),
        "--tokenizer=" + options.target_model,
        "--worker_wait_s=120",
        // A batch a worker rejects is a coordinator bug: fail the test (the coordinator
        // exits).
        "--strict_worker_batches",
    };
    if (c->draft_) c->coordinator_args_.push_back("--draft=" + c->draft_->leader_address());
    c->coordinator_args_.insert(c->coordinator_args_.end(), options.coordinator_flags.begin(),
                                options.coordinator_flags.end());
    started = c->StartCoordinator();
    if (started.ok() || !absl::StrContains(started.message(), "address in use")) break;
  }
  if (!started.ok()) return started;
  return c;
}

absl::Status Cluster::StartCoordinator() {
  auto coordinator =
      ChildProcess::Start(CoordinatorBinary(), coordinator_args_,
                          absl::StrCat(TestTempDir(), "/", options_.tag, "-coordinator-",
                                       coordinator_starts_++, ".log"));
  if (!coordinator.ok()) return coordinator.status();
  coordinator_ = *std::move(coordinator);
  return WaitUntilServing();
}

absl::Status Cluster::WaitUntilServing() {
  // Wait for the coordinator to serve; give up at once if any process died.
  const absl::Time give_up = absl::Now() + absl::Seconds(options_.start_timeout_s);
  while (CheckHealthWith(address(), options_.client_credentials) != Health::kServing) {
    bool all_running = coordinator_->Running();
    for (int r = 0; r < target_->size(); ++r) all_running &= target_->process(r).Running();
    if (draft_) all_running &= draft_->process(0).Running();
    if (!all_running || absl::Now() > give_up) {
      return absl::UnavailableError(absl::StrCat(
          all_running ? "cluster did not come up in time:\n" : "a cluster process exited:\n",
          Logs()));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::OkStatus();
}

absl::Status Cluster::RestartCoordinator(int signal) {
  coordinator_->Signal(signal);
  coordinator_->Wait(absl::Seconds(30));
  return StartCoordinator();
}

std::vector<int> Cluster::pids() {
  std::vector<int> out = {coordinator_->pid()};
  for (int r = 0; r < target_->size(); ++r) out.push_back(target_->process(r).pid());
  if (draft_) out.push_back(draft_->process(0).pid());
  return out;
}

Cluster::~Cluster() {
  if (coordinator_) {
    coordinator_->Signal(SIGTERM);
    coordinator_->Wait(absl::Seconds(10));
  }
}

std::string Cluster::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::unique_ptr<v1::Tandem::Stub> Cluster::Client() const {
  auto credentials = options_.client_credentials ? options_.client_credentials
                                                 : grpc::InsecureChannelCredentials();
  if (options_.client_token.empty()) {
    return v1::Tandem::NewStub(grpc::CreateChannel(address(), credentials));
  }
  return v1::Tandem::NewStub(CreateChannelWithToken(
      address(), credentials, grpc::ChannelArguments(), options_.client_token));
}

Health CheckHealthWith(const std::string& address,
                       const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  if (credentials == nullptr) return worker::testing::CheckHealth(address);
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  if (!status.ok()) return Health::kUnreachable;
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? Health::kServing
                                                                             : Health::kNotServing;
}

bool Cluster::WaitForDraftAvailable(bool available, absl::Duration timeout) {
  auto stub = Client();
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    if (stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok() &&
        info.draft_available() == available) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

std::string Cluster::Logs() const {
  std::string out;
  if (coordinator_) absl::StrAppend(&out, "---- coordinator\n", coordinator_->LogTail(4000), "\n");
  if (draft_) absl::StrAppend(&out, "---- draft\n", draft_->Logs());
  if (target_) absl::StrAppend(&out, "---- target\n", target_->Logs());
  return out;
}

absl::StatusOr<v1::GenerateResponse> Generate(v1::Tandem::Stub* stub, const std::string& prompt,
                                              int max_new_tokens, v1::SpeculationMethod method,
                                              int k, v1::Pipelining pipelining,
                                              int draft_tree_nodes) {
  v1::GenerateRequest req;
  req.set_text(prompt);
  req.set_max_new_tokens(max_new_tokens);
  req.set_return_token_ids(true);
  req.mutable_speculation()->set_method(method);
  if (k >= 0) req.mutable_speculation()->set_num_speculative_tokens(k);
  req.mutable_speculation()->set_pipelining(pipelining);
  if (draft_tree_nodes >= 0) req.mutable_speculation()->set_draft_tree_nodes(draft_tree_nodes);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  v1::GenerateResponse resp;
  grpc::Status st = stub->Generate(&ctx, req, &resp);
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
  }
  return resp;
}

absl::StatusOr<v1::WorkerStats> WorkerStatsOf(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  auto stub = credentials == nullptr
                  ? worker::testing::WorkerStub(address)
                  : v1::Worker::NewStub(grpc::CreateChannel(address, credentials));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::WorkerStats stats;
  grpc::Status st = stub->GetStats(&ctx, v1::GetStatsRequest(), &stats);
  if (!st.ok()) return absl::UnavailableError(st.error_message());
  return stats;
}

std::vector<std::string> TestPrompts(int count) {
  std::ifstream in("bench/prompts/code_completion.jsonl");
  std::vector<std::string> prompts;
  std::string line;
  while (static_cast<int>(prompts.size()) < count && std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("prompt")) prompts.push_back(j["prompt"].get<std::string>());
  }
  return prompts;
}

const std::vector<std::string>& HeldOutPrompts() {
  static const std::vector<std::string>* prompts = new std::vector<std::string>{
      "import os\nimport sys\n\ndef main(argv):\n    ",
      "def fibonacci(n):\n    ",
      "class Stack:\n    def __init__(self):\n        ",
      "for i in range(10):\n    ",
      "# Read a file and count the words\n",
      "def add(a, b):\n    return",
      "import numpy as np\n\nx = np.",
      "if __name__ == \"__main__\":\n    ",
      "while True:\n    line = input()\n    ",
      "def is_prime(n):\n    if n < 2:\n        ",
      "from collections import defaultdict\n\n",
      "try:\n    value = int(text)\nexcept ",
      "def quicksort(xs):\n    ",
      "with open(path) as f:\n    ",
      "result = []\nfor item in items:\n    ",
      "def __repr__(self):\n        return ",
      "print(\"hello",
      "lambda x: x",
      "def parse(line):\n    parts = line.split(",
      "import json\n\ndata = json.loads(",
  };
  return *prompts;
}

}  // namespace tandem::e2e
