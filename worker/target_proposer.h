// The worker half of a proposer that runs on the target leader (Medusa heads,
// Lookahead; coordinator/proposers/proposer.h, ProposerSite::kTargetLeader). A
// VerifySequence may ask for the next step's candidates of such a method
// (next_candidates); the target engine then runs the method's TargetProposer inside
// the verify forward, over that pass's outputs (model/forward_consumer.h: logit rows
// and, when it wants them, hidden rows, in backend memory) and the sequence's verdict,
// and returns the candidates in VerifiedSequence.next_candidates. So such a method
// costs one round trip per step and no forward of its own.
#ifndef TANDEM_WORKER_TARGET_PROPOSER_H_
#define TANDEM_WORKER_TARGET_PROPOSER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "kernels/backend.h"
#include "model/forward_consumer.h"
#include "tandem/v1/worker.pb.h"
#include "worker/verify_acceptance.h"

namespace tandem {
namespace worker {

// One sequence's share of a verify pass, as a target-side proposer sees it.
struct TargetProposerInput {
  uint64_t sequence_id = 0;
  // The sequence's logit rows among the pass's outputs: [first_row, first_row + K + 1),
  // row first_row + 0 after the last committed token, row first_row + 1 + j after
  // proposal j.
  int first_row = 0;
  int num_rows = 0;
  // The row the step's final committed token (correction or bonus) was chosen from:
  // first_row + 1 + the last accepted proposal, or first_row when none was accepted.
  int last_row = 0;
  const std::vector<int32_t>* committed = nullptr;  // This step's committed tokens.
  // Position of the final committed token (the parent of every candidate's root).
  int last_committed_position = 0;
  int max_nodes = 1;  // Most nodes to propose, >= 1.
  // Propose a node only when its estimated value (the probability its root path is
  // accepted) exceeds this (NextCandidatesRequest.min_node_value); 0 = no bound.
  double min_node_value = 0;
  // The request's entry for the sequence (its proposals, parents, num_acceptable),
  // valid during the call.
  const v1::VerifySequence* sequence = nullptr;
};

class TargetProposer {
 public:
  virtual ~TargetProposer() = default;
  virtual v1::SpeculationMethod method() const = 0;
  // Whether Propose reads ForwardOutputs::hidden_rows.
  virtual bool wants_hidden_rows() const { return false; }
  // Fills *out (empty on entry; method is set by the caller) with at most
  // in.max_nodes candidates following the step's final committed token, reading
  // `outputs` (in `backend`'s memory, valid during the call). An error fails the
  // verify (its batch is rolled back). Called once per requesting sequence, in
  // request order, on the engine's thread.
  virtual absl::Status Propose(Backend& backend, const ForwardOutputs& outputs,
                               const TargetProposerInput& in, v1::NextCandidates* out) const = 0;
};

// The target-side proposers a target worker serves, by method (production: MEDUSA when
// the model directory has heads, worker/medusa_proposer.h).
class TargetProposers {
 public:
  // Takes `proposer`; replaces one of the same method.
  void Add(std::unique_ptr<TargetProposer> proposer);
  // nullptr when `method` is not served.
  const TargetProposer* Find(v1::SpeculationMethod method) const;
  bool empty() const { return by_method_.empty(); }
  // The methods served, ascending.
  std::vector<v1::SpeculationMethod> methods() const;
  // Also serves what `more` serves (borrowed, must outlive this set; null = nothing);
  // a method this set holds itself wins.
  void Include(const TargetProposers* more) { more_ = more; }

 private:
  absl::flat_hash_map<int, std::unique_ptr<TargetProposer>> by_method_;
  const TargetProposers* more_ = nullptr;
};

// The next_candidates of one verify request: runs each requesting sequence's
// proposer over the verify pass (a VerdictConsumer) and keeps the results.
class NextCandidatesStep final : public VerdictConsumer {
 public:
  // `request` and `proposers` must outlive the step.
  NextCandidatesStep(const v1::VerifyRequest& request, const TargetProposers& proposers);

  // INVALID_ARGUMENT naming the sequence when one asks for a method not served (the
  // engine checks this before the forward).
  absl::Status Check() const;
  // Whether any sequence asks for next candidates.
  bool requested() const { return requested_; }

  bool wants_hidden_rows() const override { return wants_hidden_; }
  absl::Status Consume(Backend& backend, const ForwardOutputs& outputs,
                       const Verdicts& verdicts) override;

  // The candidates of sequence `s` (request order); null when it did not ask or its
  // verdict failed.
  const v1::NextCandidates* result(int s) const;

 private:
  const v1::VerifyRequest& request_;
  const TargetProposers& proposers_;
  bool requested_ = false;
  bool wants_hidden_ = false;
  std::vector<v1::NextCandidates> results_;
  std::vector<bool> has_result_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_TARGET_PROPOSER_H_
