// A deterministic in-process stand-in for a Tandem worker (draft or target leader), for
// engine tests. It validates every step request exactly as a real worker does
// (worker/request_validation.h) and enforces its KV budget, so a batch the coordinator
// should never build is answered as a real worker would answer it, and counted.
//
// The "model" is a fixed function of the context: the target's greedy next token is
// TargetNext(context); the draft proposes DraftNext(context), which agrees with the
// target except where a hash of the context says otherwise (draft_error_rate), so
// acceptance is partial and reproducible. Draft entries may fork (fork_from: the branch
// copies its parent's first start_position tokens; the fake's KV check counts a
// branch's whole cache, more than a real worker's shared blocks) and report top tokens
// (num_top): the proposal (0.6), then the target's token when it differs
// (top_has_target) or another one (0.3), then a third (0.1). Only greedy verification
// (chains and trees) is implemented
// (temperature 0); Verify commits the accepted proposals plus the target's token and,
// when a sequence asks for them, returns next candidates (target_methods).
// Thread-safe.
#ifndef TANDEM_COORDINATOR_FAKE_WORKER_H_
#define TANDEM_COORDINATOR_FAKE_WORKER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/worker_api.h"

namespace tandem::coordinator {

struct FakeWorkerOptions {
  bool draft = false;  // Role: draft (Draft calls) or target (Verify calls).
  int vocab_size = 2048;
  int max_batch_tokens = 1024;
  int max_speculative_tokens = 16;
  int context_length = 2048;
  int kv_block_size = 16;
  int kv_total_blocks = 4096;
  // Fraction of contexts in which the draft's proposal differs from the target's.
  double draft_error_rate = 0.25;
  absl::Duration step_delay = absl::ZeroDuration();  // Added to every step call.
  // Whether the draft's top tokens list the target's token second where the draft is
  // wrong (pre-drafted outcomes after a rejection then hit), or a token that is not it.
  bool top_has_target = true;
  // Target-side proposers served (VerifySequence.next_candidates): for any of them,
  // Verify answers with the fake target's own next max_nodes greedy tokens after the
  // step (a chain of point masses). Empty = none, as a real worker today.
  std::vector<v1::SpeculationMethod> target_methods;
};

// The target's greedy successor of `context` (never 2, the bundled models' EOS, and
// never a control id below 3).
int32_t FakeTargetNext(const std::vector<int32_t>& context, int vocab_size);
// The draft's proposal: FakeTargetNext except in a `error_rate` share of contexts.
int32_t FakeDraftNext(const std::vector<int32_t>& context, int vocab_size, double error_rate);
// Target-only greedy decoding of `n` tokens after `prompt` with the fake target.
std::vector<int32_t> FakeGreedyReference(const std::vector<int32_t>& prompt, int n, int vocab_size);

class FakeWorker : public WorkerApi {
 public:
  explicit FakeWorker(FakeWorkerOptions options, std::string name = "fake");

  const std::string& address() const override { return name_; }
  absl::StatusOr<v1::DescribeResponse> Describe() override;
  bool IsServing() override;
  absl::StatusOr<v1::PrefillResponse> Prefill(const v1::PrefillRequest& request) override;
  absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request) override;
  absl::StatusOr<v1::VerifyResponse> Verify(const v1::VerifyRequest& request) override;
  absl::Status Release(const std::vector<uint64_t>& sequence_ids) override;
  absl::StatusOr<v1::WorkerStats> GetStats() override;

  // ---- fault injection ----
  // Down: every call answers UNAVAILABLE and IsServing is false. Bringing it back up
  // after a restart (restart = true) forgets every sequence (as a new process would).
  void SetDown(bool down, bool restart = false);
  // The next `count` step calls (Prefill/Draft/Verify) answer `status` without
  // running (a rejection or a transport failure, as the test wants).
  void FailNextSteps(absl::Status status, int count = 1);

  // ---- observation ----
  struct Counters {
    int prefill_calls = 0, draft_calls = 0, verify_calls = 0, release_calls = 0;
    int rejected = 0;  // Requests that failed validation or the KV budget.
    int injected_failures = 0;
    int released_sequences = 0;
    int max_position = -1;            // Highest cache position ever written.
    int next_candidate_requests = 0;  // Verified sequences that asked for next candidates.
  };
  Counters counters() const;
  // Ids of the sequences (branches included) the worker holds now, ascending.
  std::vector<uint64_t> live_sequences() const;
  std::string last_rejection() const;

 private:
  // Validation and KV check of a step; counts a rejection.
  absl::Status Admit(const absl::Status& valid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status StepPreamble() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `tokens` at `start` into a sequence's cache (truncating first).
  void Feed(uint64_t id, uint32_t start, const std::vector<int32_t>& tokens)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckKv() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A dynamic tree (tree_nodes > 0) after `cache`, expanded as worker/draft_tree.h with
  // DraftTop after each frontier path as the draft's distribution.
  void DraftTree(const v1::DraftSequence& d, const std::vector<int32_t>& cache,
                 v1::DraftedSequence* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The draft's top tokens after `context` whose proposal is `proposal` (see above).
  v1::TopTokens DraftTop(const std::vector<int32_t>& context, int32_t proposal, int n) const;

  const FakeWorkerOptions options_;
  const std::string name_;
  mutable absl::Mutex mu_;
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  int instance_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<absl::Status> failures_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<int32_t>> caches_ ABSL_GUARDED_BY(mu_);
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::string last_rejection_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_FAKE_WORKER_H_
