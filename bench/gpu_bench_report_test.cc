#include "bench/gpu_bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace tandem {
namespace {

using json = nlohmann::json;

json Target() {
  return {{"decode", {{"median_ms", 10.0}, {"hbm_tbs", 4.0}, {"hbm_fraction", 0.5}}},
          {"verify",
           {{{"positions", 2}, {"median_ms", 11.0}, {"nu", 1.1}},
            {{"positions", 3}, {"median_ms", 12.0}, {"nu", 1.2}}}}};
}

json Draft() {
  return {{"decode", {{"median_ms", 2.0}, {"hbm_tbs", 3.0}}},
          {"draft_sampling", {{"backend_sampling_ms", 2.5}, {"host_sampling_ms", 3.5}}}};
}

TEST(CostModelFiguresTest, RatiosAndBestKFromTheMeasuredSteps) {
  std::string text;
  const json out = CostModelFigures(Target(), Draft(), 0.05, &text);
  EXPECT_DOUBLE_EQ(out["c"].get<double>(), 0.2);  // 2 ms / 10 ms.
  EXPECT_DOUBLE_EQ(out["overhead"].get<double>(), 0.05);
  EXPECT_EQ(out["nu"], json({1.0, 1.1, 1.2}));
  ASSERT_EQ(out["alphas"].size(), 3u);
  for (const json& a : out["alphas"]) {
    ASSERT_EQ(a["by_k"].size(), 2u);
    for (const char* mode : {"sequential", "pipelined"}) {
      double best = 0;
      for (const json& k : a["by_k"]) best = std::max(best, k[mode].get<double>());
      EXPECT_DOUBLE_EQ(a[std::string("best_") + mode]["speedup"].get<double>(), best) << mode;
    }
  }
  EXPECT_EQ(text.find("  c = 0.200, o = 0.050, nu(K) = 1.100 1.200\n"), 0u) << text;
  EXPECT_NE(text.find("  alpha 0.8: sequential "), std::string::npos) << text;
}

TEST(FormatModeFiguresTest, OneLinePerFigure) {
  json target = Target();
  EXPECT_EQ(FormatModeFigures("cublas", target, Draft()),
            "[gemm cublas]\n"
            "  target decode 10.000 ms (4.00 TB/s, 50% of peak)\n"
            "  target verify 2 positions 11.000 ms (nu 1.100)\n"
            "  target verify 3 positions 12.000 ms (nu 1.200)\n"
            "  draft decode 2.000 ms (3.00 TB/s)\n"
            "  draft step with sampling: on the backend 2.500 ms, on the host 3.500 ms\n");
  target["accept"] = {
      {"positions", 6}, {"backend_accept_ms", 1.0}, {"host_accept_ms", 2.0}, {"forward_ms", 0.5}};
  EXPECT_NE(FormatModeFigures("cublas", target, Draft())
                .find("  verify 6 positions with acceptance: on the backend 1.000 ms, on the host "
                      "2.000 ms (forward alone 0.500 ms)\n"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
