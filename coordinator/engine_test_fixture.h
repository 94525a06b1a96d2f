// Testonly fixture shared by the engine tests over fake workers (engine_test.cc,
// engine_fault_test.cc): starts an Engine over FakeWorkers (coordinator/fake_worker.h),
// submits requests, collects their streamed output, and in TearDown checks that no worker
// ever rejected a batch the engine built.
#ifndef TANDEM_COORDINATOR_ENGINE_TEST_FIXTURE_H_
#define TANDEM_COORDINATOR_ENGINE_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/engine.h"
#include "coordinator/fake_worker.h"
#include "coordinator/metrics.h"

namespace tandem::coordinator {

// Vocabulary size of the fake workers' greedy reference.
inline constexpr int kEngineTestVocab = 2048;

// Everything one request streamed back, gathered up to its final chunk.
struct EngineTestOutput {
  std::vector<int32_t> ids;
  std::string text;
  absl::Status status;
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::RequestStats stats;
};

// One greedy request (ignore_eos, token ids returned) as the tests submit it.
struct EngineTestRequest {
  std::vector<int32_t> prompt;
  int max_new_tokens = 40;
  v1::SpeculationMethod method = v1::SPECULATION_METHOD_DRAFT;
  std::optional<int> k = 4;
  v1::Pipelining pipelining = v1::PIPELINING_DEFAULT;
  std::vector<std::string> stop;
  absl::Duration timeout = absl::Seconds(60);
};

// A deterministic prompt of `length` tokens (BOS first), different for each `salt`.
std::vector<int32_t> EngineTestPrompt(int length, int salt);

// The value of one series (name with labels) in the metrics' text exposition; 0 if absent.
double EngineTestMetric(const CoordinatorMetrics& m, const std::string& series);

class EngineTest : public ::testing::Test {
 protected:
  using Output = EngineTestOutput;
  using RequestSpec = EngineTestRequest;

  // Loads models/target's tokenizer, creates the metrics and the default options
  // (10 ms monitor interval, EOS 2, fixed cost terms).
  void SetUp() override;

  // Checks that no worker ever rejected a batch. A test that expects rejections resets
  // engine_ (which owns the fakes) before it ends.
  void TearDown() override;

  // Starts the engine over fakes with these options (draft: none when !with_draft).
  void StartEngine(FakeWorkerOptions target, FakeWorkerOptions draft, bool with_draft = true,
                   bool draft_down_at_start = false);
  void StartEngine() { StartEngine({}, {}); }

  // Submits `spec`; returns the engine's sequence and the request's output channel, or
  // the engine's refusal.
  absl::StatusOr<std::pair<std::shared_ptr<Sequence>, std::shared_ptr<OutputChannel>>> Submit(
      const RequestSpec& spec);

  // Reads `channel` into `out` until the final chunk (returns true) or, when
  // min_tokens >= 0, until `out` holds that many tokens (returns false); fails the test
  // after `timeout`.
  static bool Read(OutputChannel& channel, Output* out, int min_tokens = -1,
                   absl::Duration timeout = absl::Seconds(60));

  // Reads `channel` to its final chunk.
  static Output Collect(OutputChannel& channel, absl::Duration timeout = absl::Seconds(60));

  // Polls `condition` every millisecond; fails the test after 10 s.
  static void WaitUntil(const std::function<bool()>& condition, const char* what);

  // Submits every request at once and collects their outputs (empty on a refusal).
  std::vector<Output> RunAll(const std::vector<RequestSpec>& specs);

  Output Run(const RequestSpec& spec) { return RunAll({spec})[0]; }

  // Target-only greedy decoding of `spec` by the fakes' model.
  static std::vector<int32_t> Reference(const RequestSpec& spec);

  EngineOptions options_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  FakeWorker* target_ = nullptr;
  FakeWorker* draft_ = nullptr;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_ENGINE_TEST_FIXTURE_H_
