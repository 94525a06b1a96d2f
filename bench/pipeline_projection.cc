// Projects speculative decoding's speedup for a layout from its cost terms, with the
// coordinator's own models: the speculation controller's S = E / (K c + nu(K) + o)
// for sequential steps (spec/cost_model.h) and the pipelining modes' round times with
// a measured speculation-cache hit rate (coordinator/pipeline_mode.h). Times are in
// units of one plain target step of the batch (T = 1), so c is a draft token's time,
// nu(K) = 1 + nu_slope * K a verify of K proposals, o the fixed cost a speculative step
// adds (RPC, coordinator). One sequence (concurrency 1); ping-pong, which needs two
// and whose memory-bound halves a linear model misprices, is not projected.
//
//   bazel run //bench:pipeline_projection -- --alpha=0.75 --c=0.375 --hit_rate=0.43
//
// Defaults: the reference layout (70B target on 4 H200, 7B draft on one): c = 0.375
// (a 7B decode step against a 70B tp-4 step), memory-bound verify (nu_slope 0.01),
// o = 0.05, alpha = 0.75; --hit_rate is what `tandem bench` measured
// (tandem_speculation_cache_lookups_total) with --predraft_branches, and
// --draft_batch_free says whether a draft forward of B branches costs one forward (a
// memory-bound GPU draft) or B (a compute-bound CPU draft).
#include <algorithm>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "coordinator/pipeline_mode.h"
#include "spec/cost_model.h"

ABSL_FLAG(double, alpha, 0.75, "Per-token acceptance rate.");
ABSL_FLAG(double, c, 0.375, "Draft token time / plain target step.");
ABSL_FLAG(double, nu_slope, 0.01, "nu(K) = 1 + nu_slope * K.");
ABSL_FLAG(double, o, 0.05, "Fixed cost of a speculative step / plain target step.");
ABSL_FLAG(double, hit_rate, 0.43, "Measured speculation-cache hit rate.");
ABSL_FLAG(int, branches, 4, "Outcomes pre-drafted per sequence (--predraft_branches).");
ABSL_FLAG(bool, draft_batch_free, true,
          "A draft forward of B branches costs one forward (memory-bound GPU draft).");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using tandem::coordinator::PipelineInputs;
  const double alpha = absl::GetFlag(FLAGS_alpha), c = absl::GetFlag(FLAGS_c);
  const double slope = absl::GetFlag(FLAGS_nu_slope), o = absl::GetFlag(FLAGS_o);
  const double h = absl::GetFlag(FLAGS_hit_rate);
  const int branches = absl::GetFlag(FLAGS_branches);
  const bool batch_free = absl::GetFlag(FLAGS_draft_batch_free);
  std::printf(
      "alpha %.2f, c %.3f, nu(K) = 1 + %.3f K, o %.3f, hit rate %.2f with %d branches "
      "(%s)\n",
      alpha, c, slope, o, h, branches,
      batch_free ? "drafted in one batch for the price of one" : "each costs its tokens");
  std::printf("%2s  %5s  %10s  %8s  %6s\n", "K", "E", "sequential", "lockstep", "gain");
  for (int k = 1; k <= 8; ++k) {
    PipelineInputs in;
    in.verify = {1 - slope, slope, 0};  // V(K + 1 rows) = nu(K); a plain step costs 1.
    in.draft = {o, c, 0};               // A draft call: o + c per token.
    in.batch = 1;
    in.k = k;
    in.continuations = true;
    in.hit_rate = h;
    in.fanout = batch_free ? 1 : branches;
    const tandem::coordinator::PipelinePrediction p = tandem::coordinator::PredictRoundTimes(in);
    const double e = tandem::spec::ExpectedTokensPerStep(alpha, k);
    const double seq = e / p.sequential_ms, lock = e / p.lockstep_ms;
    std::printf("%2d  %5.2f  %9.2fx  %7.2fx  %5.2fx\n", k, e, seq, lock, lock / seq);
  }
  return 0;
}
