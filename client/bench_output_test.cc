#include "client/bench_output.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tandem::client {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(WriteJsonTest, WritesWhatParsesBack) {
  const std::string path = TempPath("report.json");
  const nlohmann::json j = {{"a", 1}, {"b", {1, 2, 3}}};
  ASSERT_TRUE(WriteJson(path, j).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(nlohmann::json::parse(text.str()), j);
  EXPECT_EQ(WriteJson("/nonexistent-dir/x.json", j).code(), absl::StatusCode::kPermissionDenied);
}

TEST(WriteOutputsTest, ExitCodeReportsFailures) {
  const nlohmann::json report = {{"results", nlohmann::json::array()}};
  EXPECT_EQ(WriteOutputs(report, {TempPath("out.json"), "", ""}, 0), 0);
  EXPECT_EQ(WriteOutputs(report, {TempPath("out.json"), "", ""}, 1), 1);  // Kept.
  EXPECT_EQ(WriteOutputs(report, {"/nonexistent-dir/out.json", "", ""}, 0), 1);
  // A plot with an interpreter that does not exist fails, and says so.
  EXPECT_EQ(WriteOutputs(report, {"", TempPath("p.png"), "/nonexistent/python"}, 0), 1);
  EXPECT_FALSE(Plot("/nonexistent/python", TempPath("out.json"), TempPath("p.png")).ok());
}

ConfigRun MakeRun(v1::SpeculationMethod method, std::vector<std::string> texts) {
  ConfigRun run;
  run.key.method = method;
  for (size_t i = 0; i < texts.size(); ++i) {
    RequestResult r;
    r.code = absl::StatusCode::kOk;
    r.text = texts[i];
    run.results.push_back(r);
    run.prompt_index.push_back(static_cast<int>(i));
  }
  return run;
}

TEST(PrintOutputCheckTest, GreedyOutputsMustMatchNone) {
  BenchSettings s;
  s.request.temperature = 0;
  nlohmann::json json;
  const std::vector<v1::AcceptanceRule> rules = {v1::ACCEPTANCE_RULE_DEFAULT};
  EXPECT_EQ(PrintOutputCheck({MakeRun(v1::SPECULATION_METHOD_NONE, {"x", "y"}),
                              MakeRun(v1::SPECULATION_METHOD_DRAFT, {"x", "y"})},
                             s, rules, &json),
            0);
  EXPECT_EQ(PrintOutputCheck({MakeRun(v1::SPECULATION_METHOD_NONE, {"x", "y"}),
                              MakeRun(v1::SPECULATION_METHOD_DRAFT, {"x", "z"})},
                             s, rules, &json),
            1);
  // Unseeded sampling: skipped.
  s.request.temperature = 0.8f;
  EXPECT_EQ(PrintOutputCheck({MakeRun(v1::SPECULATION_METHOD_NONE, {"x"}),
                              MakeRun(v1::SPECULATION_METHOD_DRAFT, {"q"})},
                             s, rules, &json),
            0);
  EXPECT_TRUE(json.contains("skipped"));
}

}  // namespace
}  // namespace tandem::client
