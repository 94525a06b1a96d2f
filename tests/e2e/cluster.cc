#include "tests/e2e/cluster.h"

#include <csignal>
#include <fstream>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace tandem::e2e {

using worker::testing::ChildProcess;
using worker::testing::FreePort;
using worker::testing::Health;
using worker::testing::TestTempDir;
using worker::testing::WaitForHealth;
using worker::testing::WorkerGroup;

namespace {

std::string CoordinatorBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/tandem/coordinator/tandem-coordinator");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(const ClusterOptions& options) {
  std::unique_ptr<Cluster> c(new Cluster());
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
  c->port_ = FreePort();
  std::vector<std::string> args = {
      absl::StrCat("--listen=127.0.0.1:", c->port_),
      "--target=" + c->target_->leader_address(),
      "--tokenizer=" + options.target_model,
      "--worker_wait_s=120",
  };
  if (c->draft_) args.push_back("--draft=" + c->draft_->leader_address());
  args.insert(args.end(), options.coordinator_flags.begin(), options.coordinator_flags.end());
  auto coordinator = ChildProcess::Start(
      CoordinatorBinary(), args, absl::StrCat(TestTempDir(), "/", options.tag, "-coordinator.log"));
  if (!coordinator.ok()) return coordinator.status();
  c->coordinator_ = *std::move(coordinator);
  // Wait for the coordinator to serve; give up at once if any process died.
  const absl::Time give_up = absl::Now() + absl::Seconds(180);
  while (!WaitForHealth(c->address(), Health::kServing, absl::Milliseconds(200))) {
    bool all_running = c->coordinator_->Running();
    for (int r = 0; r < c->target_->size(); ++r) all_running &= c->target_->process(r).Running();
    if (c->draft_) all_running &= c->draft_->process(0).Running();
    if (!all_running || absl::Now() > give_up) {
      return absl::UnavailableError(absl::StrCat(
          all_running ? "cluster did not come up in time:\n" : "a cluster process exited:\n",
          c->Logs()));
    }
  }
  return c;
}

Cluster::~Cluster() {
  if (coordinator_) {
    coordinator_->Signal(SIGTERM);
    coordinator_->Wait(absl::Seconds(10));
  }
}

std::string Cluster::address() const { return absl::StrCat("127.0.0.1:", port_); }

std::unique_ptr<v1::Tandem::Stub> Cluster::Client() const {
  return v1::Tandem::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
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
                                              int k, v1::Pipelining pipelining) {
  v1::GenerateRequest req;
  req.set_text(prompt);
  req.set_max_new_tokens(max_new_tokens);
  req.set_return_token_ids(true);
  req.mutable_speculation()->set_method(method);
  if (k >= 0) req.mutable_speculation()->set_num_speculative_tokens(k);
  req.mutable_speculation()->set_pipelining(pipelining);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  v1::GenerateResponse resp;
  grpc::Status st = stub->Generate(&ctx, req, &resp);
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
  }
  return resp;
}

absl::StatusOr<v1::WorkerStats> WorkerStatsOf(const std::string& address) {
  auto stub = worker::testing::WorkerStub(address);
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

}  // namespace tandem::e2e
