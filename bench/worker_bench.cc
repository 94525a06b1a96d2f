// Verify-step cost of a target worker, end to end over gRPC: a 1-process target and a
// tensor-parallel group of --tp processes (--comm collectives on CPU, loopback), each
// process with --threads compute threads. For each configuration and batch size it prefills
// --batch sequences of --prompt_len tokens, then times --steps verify steps of K
// proposals per sequence and reports medians per step:
//   wall        client-side time of the Verify RPC
//   busy        server time inside the Verify handler (GetStats busy_ms delta)
//   compute     forward-pass time minus collectives (VerifyResponse.compute_ms)
//   collective  time in collectives: the step broadcast plus the model's all-reduces and
//               the logits all-gather (VerifyResponse.collective_ms)
//   rpc         wall - busy: serialization, transport and scheduling
//
//   bazel run -c opt //bench:worker_bench -- --model_dir=$PWD/models/target
//   (GPUs: --synthetic=llama-2-70b --backend=cuda --comm=nccl --tp=4: real shapes, random
//   weights, NOT A MODEL)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "comm/factory.h"
#include "model/config.h"
#include "model/synthetic_weights.h"
#include "worker/process_test_util.h"
#include "worker/verify_scenario.h"

ABSL_FLAG(std::string, model_dir, "models/target", "Target model directory.");
ABSL_FLAG(std::string, synthetic, "",
          "Instead of --model_dir: random weights of real shapes (tandem-worker --synthetic, "
          "e.g. llama-2-7b or llama-2-70b). NOT A MODEL: only the timings mean anything.");
ABSL_FLAG(std::string, backend, "cpu", "Compute backend of the workers: cpu or cuda.");
ABSL_FLAG(std::string, tp, "1,2,4",
          "Comma-separated group sizes to measure (sizes the model does not divide by are "
          "skipped).");
ABSL_FLAG(std::string, batch, "1,4", "Comma-separated sequences per verify step.");
ABSL_FLAG(int, k, 4, "Proposals per sequence per step.");
ABSL_FLAG(int, steps, 20, "Timed verify steps per configuration.");
ABSL_FLAG(int, warmup, 3, "Untimed verify steps first.");
ABSL_FLAG(int, prompt_len, 64, "Prompt tokens per sequence.");
ABSL_FLAG(int, threads, 1, "Compute threads per worker process.");
ABSL_FLAG(std::string, worker_binary, "", "tandem-worker path (default: from runfiles).");
ABSL_FLAG(int, probe_iters, 200, "Iterations of the raw all-reduce probe (0 = skip).");
ABSL_FLAG(std::string, comm, "tcp",
          "Collective backend of the groups and the probe: tcp or gloo (tandem-worker --comm).");

namespace tandem {
namespace {

using worker::testing::FromGrpc;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string DefaultBinary(const char* argv0) {
  const char* srcdir = std::getenv("RUNFILES_DIR");
  if (srcdir != nullptr) return absl::StrCat(srcdir, "/tandem/worker/tandem-worker");
  return absl::StrCat(argv0, ".runfiles/tandem/worker/tandem-worker");
}

std::vector<int> IntList(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v) && v > 0) out.push_back(v);
  }
  return out;
}

struct Row {
  int tp, batch;
  double wall, busy, compute, collective, rpc;
};

// Raw --comm latency without the worker: `tp` forked processes all-reduce `floats`
// floats `iters` times; returns rank 0's mean microseconds per call (-1 on failure).
double ProbeAllReduceUs(int tp, int floats, int iters, const std::string& dir) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  std::vector<pid_t> children;
  const std::string run_id = absl::StrCat("probe-", tp, "-", floats, "-", getpid());
  for (int rank = 0; rank < tp; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid > 0) {
      children.push_back(pid);
      continue;
    }
    CommOptions options;
    options.backend = absl::GetFlag(FLAGS_comm);
    options.rank = rank;
    options.size = tp;
    options.store_directory = dir;
    options.run_id = run_id;
    auto comm = CreateCommunicator(options);
    if (!comm.ok()) _exit(1);
    std::vector<float> data(floats, 1.0f);
    if (!(*comm)->Barrier(absl::Seconds(30)).ok()) _exit(1);
    const absl::Time start = absl::Now();
    for (int i = 0; i < iters; ++i) {
      if (!(*comm)->AllReduceSum(data.data(), data.size(), absl::Seconds(30)).ok()) _exit(1);
    }
    const double us = absl::ToDoubleMicroseconds(absl::Now() - start) / iters;
    if (rank == 0 && write(fds[1], &us, sizeof(us)) != sizeof(us)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  double us = -1;
  if (read(fds[0], &us, sizeof(us)) != sizeof(us)) us = -1;
  close(fds[0]);
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  return us;
}

absl::StatusOr<double> BusyMs(v1::Worker::Stub& stub) {
  grpc::ClientContext context;
  v1::WorkerStats stats;
  absl::Status status = FromGrpc(stub.GetStats(&context, v1::GetStatsRequest(), &stats));
  if (!status.ok()) return status;
  return stats.busy_ms();
}

absl::StatusOr<Row> Measure(const std::string& address, int tp, int batch, int vocab,
                            uint64_t base_id) {
  auto stub = worker::testing::WorkerStub(address);
  const int k = absl::GetFlag(FLAGS_k);
  std::mt19937 rng(1234 + batch);
  std::vector<int> cached(batch);
  std::vector<int32_t> last(batch);
  {
    v1::PrefillRequest request;
    for (int s = 0; s < batch; ++s) {
      v1::PrefillSequence* seq = request.add_sequences();
      seq->set_sequence_id(base_id + s);
      for (int i = 0; i < absl::GetFlag(FLAGS_prompt_len) - 1; ++i) seq->add_tokens(rng() % vocab);
      cached[s] = seq->tokens_size();
      last[s] = rng() % vocab;
    }
    grpc::ClientContext context;
    v1::PrefillResponse response;
    absl::Status status = FromGrpc(stub->Prefill(&context, request, &response));
    if (!status.ok()) return status;
  }
  std::vector<double> wall, busy, compute, collective, rpc;
  const int warmup = absl::GetFlag(FLAGS_warmup);
  for (int step = 0; step < warmup + absl::GetFlag(FLAGS_steps); ++step) {
    v1::VerifyRequest request;
    for (int s = 0; s < batch; ++s) {
      v1::VerifySequence* seq = request.add_sequences();
      seq->set_sequence_id(base_id + s);
      seq->set_start_position(cached[s]);
      seq->add_tokens(last[s]);
      for (int j = 0; j < k; ++j) {
        const int32_t token = rng() % vocab;
        v1::ProposedToken* p = seq->add_proposals();
        p->set_token(token);
        p->add_q_ids(token);
        p->add_q_probs(1.0f);
      }
      seq->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_GREEDY);
    }
    absl::StatusOr<double> busy_before = BusyMs(*stub);
    if (!busy_before.ok()) return busy_before.status();
    grpc::ClientContext context;
    v1::VerifyResponse response;
    const absl::Time start = absl::Now();
    absl::Status status = FromGrpc(stub->Verify(&context, request, &response));
    const double wall_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!status.ok()) return status;
    absl::StatusOr<double> busy_after = BusyMs(*stub);
    if (!busy_after.ok()) return busy_after.status();
    for (int s = 0; s < batch; ++s) {
      const v1::VerifiedSequence& out = response.sequences(s);
      cached[s] = out.cached_length();
      last[s] = out.committed(out.committed_size() - 1);
    }
    if (step < warmup) continue;
    wall.push_back(wall_ms);
    busy.push_back(*busy_after - *busy_before);
    compute.push_back(response.compute_ms());
    collective.push_back(response.collective_ms());
    rpc.push_back(wall_ms - (*busy_after - *busy_before));
  }
  return Row{tp,         batch, Median(wall), Median(busy), Median(compute), Median(collective),
             Median(rpc)};
}

// Empty when `config` splits over `tp` ranks, else the reason it does not.
std::string Indivisible(const LlamaConfig& c, int tp) {
  if (c.num_heads % tp != 0) return absl::StrCat("num_attention_heads ", c.num_heads);
  // Fewer KV heads than ranks is fine when tp is a multiple (one replicated head each).
  if (c.num_kv_heads % tp != 0 && tp % c.num_kv_heads != 0) {
    return absl::StrCat("num_key_value_heads ", c.num_kv_heads);
  }
  if (c.intermediate_size % tp != 0) return absl::StrCat("intermediate_size ", c.intermediate_size);
  if (c.vocab_size % tp != 0) return absl::StrCat("vocab_size ", c.vocab_size);
  return "";
}

int Run(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string synthetic = absl::GetFlag(FLAGS_synthetic);
  const std::string model_dir =
      synthetic.empty() ? absl::GetFlag(FLAGS_model_dir) : "synthetic:" + synthetic;
  absl::StatusOr<LlamaConfig> config;
  if (synthetic.empty()) {
    config = LoadLlamaConfig(model_dir);
  } else {
    absl::StatusOr<SyntheticModel> model = ParseSyntheticModel(synthetic);
    if (model.ok()) {
      config = model->config;
    } else {
      config = model.status();
    }
  }
  if (!config.ok()) {
    std::fprintf(stderr, "worker_bench: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  std::string binary = absl::GetFlag(FLAGS_worker_binary);
  if (binary.empty()) binary = DefaultBinary(argv[0]);
  char dir_template[] = "/tmp/worker_bench.XXXXXX";
  const std::string log_dir = mkdtemp(dir_template);
  const int threads = absl::GetFlag(FLAGS_threads);
  std::printf(
      "worker_bench: model %s (%lld parameters, hidden %d, %d layers, vocab %d), K = %d, "
      "%d threads per process, %s collectives, %d timed steps (median), logs in %s\n",
      model_dir.c_str(), config->NumParameters(), config->hidden_size, config->num_layers,
      config->vocab_size, absl::GetFlag(FLAGS_k), threads, absl::GetFlag(FLAGS_comm).c_str(),
      absl::GetFlag(FLAGS_steps), log_dir.c_str());
  std::vector<int> sizes;
  for (int tp : IntList(absl::GetFlag(FLAGS_tp))) {
    const std::string reason = Indivisible(*config, tp);
    if (reason.empty()) {
      sizes.push_back(tp);
    } else {
      std::printf("tp %d skipped: %s is not divisible by %d\n", tp, reason.c_str(), tp);
    }
  }
  // Before any gRPC thread exists (the probe forks).
  std::vector<std::pair<int, double>> probes;
  const int probe_iters = absl::GetFlag(FLAGS_probe_iters);
  for (int tp : sizes) {
    if (tp < 2 || probe_iters <= 0) continue;
    const int floats = (absl::GetFlag(FLAGS_k) + 1) * config->hidden_size;
    probes.emplace_back(tp, ProbeAllReduceUs(tp, floats, probe_iters, log_dir + "/probe"));
  }
  std::vector<Row> rows;
  for (int tp : sizes) {
    auto group = worker::testing::WorkerGroup::Start(
        model_dir, tp, absl::StrCat("bench-tp", tp),
        {absl::StrCat("--threads=", threads), "--comm=" + absl::GetFlag(FLAGS_comm),
         "--backend=" + absl::GetFlag(FLAGS_backend), "--kv_cache_mb=256",
         "--max_batch_tokens=1024", "--step_timeout_s=60", "--lease_timeout_s=3600"},
        binary, log_dir);
    if (!group.ok()) {
      std::fprintf(stderr, "worker_bench: %s\n", std::string(group.status().message()).c_str());
      return 1;
    }
    bool up = true;
    for (int r = 0; r < tp && up; ++r) {
      up = worker::testing::WaitForHealth((*group)->address(r), worker::testing::Health::kServing,
                                          absl::Seconds(120));
    }
    if (!up) {
      std::fprintf(stderr, "worker_bench: tp %d did not start:\n%s\n", tp,
                   (*group)->Logs().c_str());
      return 1;
    }
    uint64_t base_id = 1;
    for (int batch : IntList(absl::GetFlag(FLAGS_batch))) {
      auto row = Measure((*group)->leader_address(), tp, batch, config->vocab_size, base_id);
      base_id += 1000;
      if (!row.ok()) {
        std::fprintf(stderr, "worker_bench: tp %d batch %d: %s\n", tp, batch,
                     std::string(row.status().message()).c_str());
        return 1;
      }
      rows.push_back(*row);
    }
    (*group)->process(0).Signal(SIGTERM);
    for (int r = 0; r < tp; ++r) (*group)->process(r).Wait(absl::Seconds(20));
  }
  std::printf(
      "\n| tp | batch | positions | wall ms | busy ms | compute ms | collective ms | rpc ms |\n");
  std::printf(
      "|---:|------:|----------:|--------:|--------:|-----------:|--------------:|-------:|\n");
  for (const Row& r : rows) {
    std::printf("| %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.tp, r.batch,
                r.batch * (absl::GetFlag(FLAGS_k) + 1), r.wall, r.busy, r.compute, r.collective,
                r.rpc);
  }
  const int per_step = 2 * config->num_layers + 2;
  for (const auto& [tp, us] : probes) {
    std::printf(
        "\nraw %s AllReduceSum, %d processes, %d floats (one verify row set): %.0f us "
        "per call; a verify step makes %d collectives (1 broadcast, %d all-reduces, "
        "1 all-gather)\n",
        absl::GetFlag(FLAGS_comm).c_str(), tp, (absl::GetFlag(FLAGS_k) + 1) * config->hidden_size,
        us, per_step, 2 * config->num_layers);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) { return tandem::Run(argc, argv); }
