// Medusa heads (coordinator half) as a target-leader proposer: the heads run inside the
// target leader's verify forward (worker/medusa_proposer.h) and their candidate tree
// comes back with each verify result as the next step's candidates, so a step is one
// verify round trip and no draft call. The first step of a sequence is a plain verify
// (there is no hidden row yet). No per-sequence state: the tree is rebuilt from the
// target's hidden row every step.
//
// Tree size: MaxK() nodes (what the engine asks the leader for): the server's default
// (coordinator --medusa_nodes, kDefaultMedusaNodes unless set), or a request's fixed
// num_speculative_tokens (a per-request override), capped by max_k; 0 turns speculation
// off. The leader returns the first that many of its medusa_choices paths.
#ifndef TANDEM_COORDINATOR_PROPOSERS_MEDUSA_PROPOSER_H_
#define TANDEM_COORDINATOR_PROPOSERS_MEDUSA_PROPOSER_H_

#include "coordinator/proposers/proposer.h"

namespace tandem::coordinator {

// Nodes per tree unless the server or the request says otherwise: the fastest size
// measured on the bundled target (bench/README.md, Medusa).
inline constexpr int kDefaultMedusaNodes = 4;

class MedusaProposer final : public Proposer {
 public:
  // `default_nodes` >= 1: the tree size of a request without a fixed size.
  explicit MedusaProposer(int default_nodes = kDefaultMedusaNodes)
      : default_nodes_(default_nodes) {}

  v1::SpeculationMethod method() const override { return v1::SPECULATION_METHOD_MEDUSA; }
  ProposerCapabilities capabilities() const override {
    ProposerCapabilities c;
    c.site = ProposerSite::kTargetLeader;
    c.makes_trees = true;
    c.needs_hidden_state = true;
    return c;
  }
  std::unique_ptr<ProposerState> NewState(const Sequence& s) const override {
    return std::make_unique<ProposerState>();
  }
  const char* Unusable(const Sequence& s, const ProposerState& state,
                       const WorkerAvailability& workers,
                       const PlannerOptions& options) const override {
    return nullptr;
  }
  int MaxK(const Sequence& s, const PlannerOptions& options) const override;
  // The candidates the leader returned with `result` (none when it returned none).
  std::optional<Candidates> OnVerified(const Sequence& s, ProposerState& state,
                                       const Candidates& verified,
                                       const v1::VerifiedSequence& result,
                                       int committed) const override;

 private:
  int default_nodes_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_MEDUSA_PROPOSER_H_
