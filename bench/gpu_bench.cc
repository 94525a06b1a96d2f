// GPU benchmark of the reference deployment on ONE device, with SYNTHETIC weights
// (random values with the real shapes; not a model):
//  (a) one tensor-parallel rank of the target (default llama-2-70b:0/4): decode step
//      (1 position) and verify steps (K+1 = 2..max_k+1 positions) at a fixed context,
//      with the achieved HBM bandwidth (weight bytes + KV bytes read once, per second)
//      against --peak_hbm_tbs;
//  (b) the draft (default llama-2-7b) decode step;
//  (c) the cost ratio c = T(draft step) / T(target step), nu(K) = T(verify K+1) /
//      T(decode), and the modelled speedup (spec/cost_model.h) at acceptance 0.6, 0.7,
//      0.8, sequential and pipelined.
// Each GEMM mode (--gemm) is measured separately. The target rank runs with a no-op
// communicator: tensor-parallel collectives (two all-reduces per layer, one logits
// all-gather) are NOT included, so the step times are the rank's compute only.
// Writes gpu_bench.json and gpu_bench.txt to --out_dir.
//
//   gpu_bench --out_dir=/tmp/out                       (CUDA, defaults above)
//   gpu_bench --backend=cpu --target=tiny:0/2 --draft=tiny --context=32 --max_k=3
//                                                      (plumbing check without a GPU)
//
// Never run on a GPU in the environment it was written in.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu_bench_report.h"
#include "comm/communicator.h"
#include "kernels/accept/draft_sample.h"
#include "kernels/accept/verify_accept.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device.h"
#include "model/kv_cache.h"
#include "model/llama.h"
#include "model/output_consumers.h"
#include "model/synthetic_weights.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"

ABSL_FLAG(std::string, backend, "cuda", "cuda, or cpu for a plumbing check");
ABSL_FLAG(std::string, target, "llama-2-70b:0/4",
          "Synthetic target rank (see synthetic_weights.h)");
ABSL_FLAG(std::string, draft, "llama-2-7b", "Synthetic draft model");
ABSL_FLAG(std::string, gemm, "both", "CUDA GEMM modes: batch_invariant, cublas or both");
ABSL_FLAG(int, context, 1024, "Cached tokens before each timed step");
ABSL_FLAG(int, max_k, 7, "Largest K; verify steps of K+1 = 2..max_k+1 positions");
ABSL_FLAG(double, min_seconds, 1.0, "Least timed seconds per figure");
ABSL_FLAG(int, min_iters, 10, "Least timed calls per figure");
ABSL_FLAG(double, peak_hbm_tbs, 4.8, "Device memory bandwidth to compare with (H200: 4.8)");
ABSL_FLAG(double, overhead, 0.0, "o: coordinator + RPC overhead per step / T(target step)");
ABSL_FLAG(int, threads, 0, "CPU backend threads (cpu only)");
ABSL_FLAG(std::string, out_dir, ".", "Where gpu_bench.json and gpu_bench.txt go");

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

[[noreturn]] void Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "gpu_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

// Stands in for the other ranks of a tensor-parallel group: every collective is a
// no-op, so the model runs exactly one rank's compute.
class NoopCommunicator : public Communicator {
 public:
  NoopCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "none"; }
  absl::Status AllReduceSum(float*, size_t, absl::Duration) override { return absl::OkStatus(); }
  absl::Status AllGather(const void*, void*, size_t, absl::Duration) override {
    return absl::OkStatus();
  }
  absl::Status Broadcast(void*, size_t, int, absl::Duration) override { return absl::OkStatus(); }
  absl::Status Barrier(absl::Duration) override { return absl::OkStatus(); }

 private:
  int rank_, size_;
};

struct Timing {
  double median_ms = 0, best_ms = 0;
};

Timing Measure(const std::function<absl::Status()>& fn, const std::string& what) {
  for (int i = 0; i < 2; ++i) {
    if (absl::Status s = fn(); !s.ok()) Fail(what, s);
  }
  std::vector<double> ms;
  double total = 0;
  while (int(ms.size()) < absl::GetFlag(FLAGS_min_iters) ||
         total < absl::GetFlag(FLAGS_min_seconds)) {
    const auto start = Clock::now();
    if (absl::Status s = fn(); !s.ok()) Fail(what, s);
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    ms.push_back(t * 1e3);
    total += t;
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[0]};
}

std::unique_ptr<Backend> NewBackend(const std::string& gemm) {
  if (absl::GetFlag(FLAGS_backend) == "cpu") {
    return std::make_unique<CpuBackend>(absl::GetFlag(FLAGS_threads));
  }
  CudaBackendOptions options;
  auto mode = ParseGemmMode(gemm);
  if (!mode.ok()) Fail("--gemm", mode.status());
  options.gemm = *mode;
  auto backend = CudaBackend::Create(options);
  if (!backend.ok()) Fail("creating the CUDA backend", backend.status());
  return *std::move(backend);
}

// A verify step of K = min(5, max_k) proposals with its acceptance (rejection sampling,
// temperature 0.8, top-p 0.9) run on the backend (VerifyAcceptConsumer: only committed
// tokens come back) versus on the host (HostLogitsConsumer copies the K + 1 full-vocabulary logit
// rows back, then the spec reference runs). `step_ms[k]` is the forward alone.
json BenchAcceptance(LlamaModel& model, const LlamaConfig& c, int context, int max_k,
                     const std::vector<double>& step_ms) {
  const int k = std::min(5, max_k);
  SequenceInput in;
  in.seq_id = 1;
  in.start_position = context;
  VerifyChain chain;
  chain.sampling = {0.8f, 0, 0.9f};
  chain.params.rule = spec::AcceptanceRule::kRejection;
  chain.key = {1, 0};
  in.tokens.push_back(3);
  for (int i = 0; i < k; ++i) {
    spec::Proposal proposal;
    proposal.token = 4 + i;
    proposal.q = spec::PointMass(proposal.token);
    chain.proposals.push_back(proposal);
    in.tokens.push_back(proposal.token);
  }
  for (int i = 0; i <= k; ++i) in.logit_indices.push_back(i);
  std::vector<VerifyOutcome> outcomes;
  std::vector<float> logits;
  const VerifyChain chains[] = {chain};
  VerifyAcceptConsumer accept(chains, &outcomes);
  const Timing device =
      Measure([&] { return model.Forward({in}, accept); }, "verify + device acceptance");
  const Timing host = Measure(
      [&] {
        absl::Status s = ForwardToHost(model, {in}, &logits);
        return s.ok() ? HostVerifyAccept(logits, c.vocab_size, {chain}, &outcomes) : s;
      },
      "verify + host acceptance");
  std::printf(
      "verify %d positions: forward %.3f ms; with acceptance on the backend %.3f ms, "
      "on the host (logits copied) %.3f ms\n",
      k + 1, step_ms[k], device.median_ms, host.median_ms);
  std::fflush(stdout);
  return {{"positions", k + 1},
          {"rule", "rejection, temperature 0.8, top_p 0.9"},
          {"forward_ms", step_ms[k]},
          {"backend_accept_ms", device.median_ms},
          {"host_accept_ms", host.median_ms}};
}

// A draft decode step with its proposal sampled on the backend (DraftSampleConsumer:
// temperature 0.8, top-p 0.9, q of 32 tokens; only the token and q come back) versus
// the logits copied back and the host reference run on them. `decode_ms` is the
// forward alone.
json BenchDraftSampling(LlamaModel& model, const LlamaConfig& c, int context, double decode_ms) {
  SequenceInput in;
  in.seq_id = 1;
  in.start_position = context;
  in.tokens = {3};
  in.logit_indices = {0};
  DraftRow draft;
  draft.sampling = {0.8f, 0, 0.9f};
  draft.q_size = 32;
  draft.seed = 1;
  std::vector<DraftProposal> proposals;
  std::vector<float> logits;
  const DraftRow drafts[] = {draft};
  DraftSampleConsumer sample(drafts, &proposals);
  const Timing device =
      Measure([&] { return model.Forward({in}, sample); }, "draft step + sampling on the backend");
  const Timing host = Measure(
      [&] {
        absl::Status s = ForwardToHost(model, {in}, &logits);
        return s.ok() ? HostSampleDrafts(logits, c.vocab_size, {draft}, &proposals) : s;
      },
      "draft step + host sampling");
  std::printf(
      "draft step: forward %.3f ms; with sampling on the backend %.3f ms, on the host "
      "(logits copied) %.3f ms\n",
      decode_ms, device.median_ms, host.median_ms);
  std::fflush(stdout);
  return {{"sampling", "temperature 0.8, top_p 0.9, q of 32"},
          {"forward_ms", decode_ms},
          {"backend_sampling_ms", device.median_ms},
          {"host_sampling_ms", host.median_ms}};
}

// Times decode and verify steps of `spec` on a fresh backend; returns the figures.
json BenchModel(const std::string& spec, const std::string& gemm, bool verify_steps) {
  auto model_spec = ParseSyntheticModel(spec);
  if (!model_spec.ok()) Fail("--target/--draft", model_spec.status());
  const LlamaConfig& c = model_spec->config;
  const int context = absl::GetFlag(FLAGS_context);
  const int max_k = verify_steps ? absl::GetFlag(FLAGS_max_k) : 0;
  std::printf("[%s, %s] generating synthetic weights (%.1f GB, not a model)...\n", spec.c_str(),
              gemm.c_str(), SyntheticWeightBytes(*model_spec) / 1e9);
  std::fflush(stdout);
  auto weights = MakeSyntheticWeights(*model_spec, 1);
  if (!weights.ok()) Fail("synthetic weights", weights.status());

  std::unique_ptr<Backend> backend = NewBackend(gemm);
  std::unique_ptr<NoopCommunicator> comm;
  if (model_spec->tp_size > 1) {
    comm = std::make_unique<NoopCommunicator>(model_spec->tp_rank, model_spec->tp_size);
  }
  const int kv_heads = c.num_kv_heads / model_spec->tp_size;
  LlamaModelOptions options;
  options.max_batch_tokens = std::max(context, max_k + 1);
  const int tokens = context + max_k + 1;
  options.kv_cache_bytes = KvBytesPerBlock(c.num_layers, options.block_size, kv_heads, c.head_dim) *
                           size_t(tokens / options.block_size + 2);
  const auto upload_start = Clock::now();
  auto model = LlamaModel::Create(*weights, backend.get(), comm.get(), options);
  if (!model.ok()) Fail("uploading " + spec, model.status());
  weights = absl::InternalError("released");  // Host copies are no longer needed.
  const double upload_s = std::chrono::duration<double>(Clock::now() - upload_start).count();

  std::vector<int32_t> ids(tokens);
  for (int i = 0; i < tokens; ++i) ids[i] = 3 + (i * 7919) % (c.vocab_size - 3);
  auto seq = [&](int start, int n) {
    SequenceInput in;
    in.seq_id = 1;
    in.start_position = start;
    in.tokens.assign(ids.begin() + start, ids.begin() + start + n);
    for (int i = 0; i < n; ++i) in.logit_indices.push_back(i);
    return in;
  };
  std::vector<float> logits;
  if (absl::Status s = ForwardToHost(**model, {seq(0, context)}, &logits); !s.ok())
    Fail("prefill", s);

  // Bytes a step must read at least: every weight once (the embedding only for the
  // rows used) and the context's K and V once.
  const double weight_bytes =
      double(SyntheticWeightBytes(*model_spec)) - 2.0 * c.vocab_size * double(c.hidden_size);
  const double kv_bytes = double(KvBytesPerBlock(c.num_layers, 1, kv_heads, c.head_dim)) * context;
  json result;
  result["model"] = spec;
  result["gemm"] = gemm;
  result["upload_seconds"] = upload_s;
  result["weight_bytes"] = weight_bytes;
  result["kv_bytes_at_context"] = kv_bytes;
  const double peak = absl::GetFlag(FLAGS_peak_hbm_tbs);
  std::vector<double> step_ms;
  for (int k = 0; k <= max_k; ++k) {
    const int rows = k + 1;
    const Timing t = Measure([&] { return ForwardToHost(**model, {seq(context, rows)}, &logits); },
                             absl::StrCat(spec, " step of ", rows));
    const double bytes = weight_bytes + kv_bytes + 2.0 * rows * c.hidden_size;
    const double tbs = bytes / (t.median_ms * 1e-3) / 1e12;
    json step = {{"positions", rows},
                 {"median_ms", t.median_ms},
                 {"best_ms", t.best_ms},
                 {"hbm_tbs", tbs},
                 {"hbm_fraction", tbs / peak}};
    if (k > 0) step["nu"] = t.median_ms / step_ms[0];
    step_ms.push_back(t.median_ms);
    result[k == 0 ? "decode" : "verify"].push_back(step);
    std::printf("[%s, %s] %d position%s: %.3f ms (best %.3f), %.2f TB/s = %.0f%% of %.1f\n",
                spec.c_str(), gemm.c_str(), rows, rows == 1 ? "" : "s", t.median_ms, t.best_ms, tbs,
                100 * tbs / peak, peak);
    std::fflush(stdout);
  }
  result["decode"] = result["decode"][0];
  if (verify_steps && max_k > 0)
    result["accept"] = BenchAcceptance(**model, c, context, max_k, step_ms);
  if (!verify_steps) result["draft_sampling"] = BenchDraftSampling(**model, c, context, step_ms[0]);
  return result;
}

int Run() {
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "cuda" && backend != "cpu") Fail("--backend", absl::InvalidArgumentError(backend));
  std::vector<std::string> modes = {"cpu"};
  std::string device = "cpu";
  if (backend == "cuda") {
    std::string why;
    if (cuda::DeviceCount(&why) == 0) {
      Fail("--backend=cuda", absl::UnavailableError("no CUDA device: " + why));
    }
    device = cuda::DeviceDescription(0);
    const std::string gemm = absl::GetFlag(FLAGS_gemm);
    modes = gemm == "both" ? std::vector<std::string>{"batch_invariant", "cublas"}
                           : std::vector<std::string>{gemm};
  }
  json report;
  report["note"] =
      "SYNTHETIC weights (random values, real shapes; not a model). One device; the target "
      "is one tensor-parallel rank with collectives excluded (compute only).";
  report["device"] = device;
  report["peak_hbm_tbs"] = absl::GetFlag(FLAGS_peak_hbm_tbs);
  report["context"] = absl::GetFlag(FLAGS_context);
  std::string text = absl::StrFormat(
      "gpu_bench on %s: target %s, draft %s, context %d (synthetic weights, not a model; "
      "collectives excluded)\n",
      device, absl::GetFlag(FLAGS_target), absl::GetFlag(FLAGS_draft),
      absl::GetFlag(FLAGS_context));
  for (const std::string& mode : modes) {
    json target = BenchModel(absl::GetFlag(FLAGS_target), mode, true);
    json draft = BenchModel(absl::GetFlag(FLAGS_draft), mode, false);
    text += FormatModeFigures(mode, target, draft);
    json cost = CostModelFigures(target, draft, absl::GetFlag(FLAGS_overhead), &text);
    report["modes"][mode] = {{"target", target}, {"draft", draft}, {"cost_model", cost}};
  }
  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  std::ofstream(dir + "/gpu_bench.json") << report.dump(2) << "\n";
  std::ofstream(dir + "/gpu_bench.txt") << text;
  if (!std::ifstream(dir + "/gpu_bench.json").good()) {
    Fail("writing results", absl::UnavailableError("cannot write to --out_dir=" + dir));
  }
  std::printf("\n%s\nwrote %s/gpu_bench.json and %s/gpu_bench.txt\n", text.c_str(), dir.c_str(),
              dir.c_str());
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Run();
}
