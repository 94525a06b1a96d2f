#include "bench/gpu_bench_report.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "spec/cost_model.h"

namespace tandem {

using json = nlohmann::json;

json CostModelFigures(const json& target, const json& draft, double overhead, std::string* text) {
  const double t_target = target["decode"]["median_ms"].get<double>();
  const double c = draft["decode"]["median_ms"].get<double>() / t_target;
  std::vector<double> nu = {1.0};
  for (const json& step : target["verify"]) nu.push_back(step["nu"].get<double>());
  spec::CostModel model;
  model.draft_cost = c;
  model.verify_cost = spec::TableVerifyCost(nu);
  model.overhead = overhead;
  const int max_k = int(nu.size()) - 1;
  json out = {{"c", c}, {"overhead", model.overhead}, {"nu", nu}};
  *text += absl::StrFormat("  c = %.3f, o = %.3f, nu(K) =", c, model.overhead);
  for (int k = 1; k <= max_k; ++k) *text += absl::StrFormat(" %.3f", nu[k]);
  *text += "\n";
  for (double alpha : {0.6, 0.7, 0.8}) {
    json a = {{"alpha", alpha}};
    for (int k = 1; k <= max_k; ++k) {
      a["by_k"].push_back({{"k", k},
                           {"sequential", spec::ModelledSpeedup(alpha, k, model, false)},
                           {"pipelined", spec::ModelledSpeedup(alpha, k, model, true)}});
    }
    const spec::DraftLengthChoice seq = spec::BestDraftLength(alpha, model, max_k, false);
    const spec::DraftLengthChoice pipe = spec::BestDraftLength(alpha, model, max_k, true);
    a["best_sequential"] = {{"k", seq.k}, {"speedup", seq.speedup}};
    a["best_pipelined"] = {{"k", pipe.k}, {"speedup", pipe.speedup}};
    *text += absl::StrFormat("  alpha %.1f: sequential %.2fx (K=%d), pipelined %.2fx (K=%d)\n",
                             alpha, seq.speedup, seq.k, pipe.speedup, pipe.k);
    out["alphas"].push_back(a);
  }
  return out;
}

std::string FormatModeFigures(const std::string& mode, const json& target, const json& draft) {
  std::string text;
  text += absl::StrFormat("[gemm %s]\n  target decode %.3f ms (%.2f TB/s, %.0f%% of peak)\n", mode,
                          target["decode"]["median_ms"].get<double>(),
                          target["decode"]["hbm_tbs"].get<double>(),
                          100 * target["decode"]["hbm_fraction"].get<double>());
  for (const json& step : target["verify"]) {
    text += absl::StrFormat("  target verify %d positions %.3f ms (nu %.3f)\n",
                            step["positions"].get<int>(), step["median_ms"].get<double>(),
                            step["nu"].get<double>());
  }
  if (target.contains("accept")) {
    const json& a = target["accept"];
    text += absl::StrFormat(
        "  verify %d positions with acceptance: on the backend %.3f ms, on the host %.3f ms "
        "(forward alone %.3f ms)\n",
        a["positions"].get<int>(), a["backend_accept_ms"].get<double>(),
        a["host_accept_ms"].get<double>(), a["forward_ms"].get<double>());
  }
  text += absl::StrFormat("  draft decode %.3f ms (%.2f TB/s)\n",
                          draft["decode"]["median_ms"].get<double>(),
                          draft["decode"]["hbm_tbs"].get<double>());
  text +=
      absl::StrFormat("  draft step with sampling: on the backend %.3f ms, on the host %.3f ms\n",
                      draft["draft_sampling"]["backend_sampling_ms"].get<double>(),
                      draft["draft_sampling"]["host_sampling_ms"].get<double>());
  return text;
}

}  // namespace tandem
