// gpu_bench's figures as text and as modelled speedups: the per-GEMM-mode summary lines
// and the cost-model figures (spec/cost_model.h) from measured target and draft steps.
// The json objects are those gpu_bench writes to gpu_bench.json (see gpu_bench.cc).
#ifndef TANDEM_BENCH_GPU_BENCH_REPORT_H_
#define TANDEM_BENCH_GPU_BENCH_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>

namespace tandem {

// Cost model from one GEMM mode's figures: c = T(draft decode) / T(target decode),
// nu(K) from target["verify"][K-1]["nu"] (nu(0) = 1), the given `overhead` o; for
// acceptance 0.6, 0.7 and 0.8 the sequential and pipelined modelled speedup at every K
// and the best K. Requires target["decode"]["median_ms"] > 0, draft["decode"]["median_ms"]
// and a "nu" in every target["verify"] entry (throws nlohmann::json errors otherwise).
// Appends the summary lines to `*text`.
nlohmann::json CostModelFigures(const nlohmann::json& target, const nlohmann::json& draft,
                                double overhead, std::string* text);

// The text summary of one GEMM mode: target decode (time, bandwidth, fraction of peak),
// each verify step, the acceptance comparison when target has "accept", draft decode and
// draft sampling (draft must have "draft_sampling"). Ends with a newline.
std::string FormatModeFigures(const std::string& mode, const nlohmann::json& target,
                              const nlohmann::json& draft);

}  // namespace tandem

#endif  // TANDEM_BENCH_GPU_BENCH_REPORT_H_
