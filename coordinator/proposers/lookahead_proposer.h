// Lookahead decoding (Fu et al., ICML 2024) as a target-leader proposer: no draft model,
// no training. Each step's verify carries the verification branch (the n-gram pool's
// guesses for the last committed token, a trie, acceptable) and the Jacobi window
// (computed only), laid out by coordinator/proposers/lookahead_window.h; the target
// leader returns the window's next level (worker/lookahead_proposer.h) with the result.
//
// State, per sequence, all here: the n-gram pool (seeded with the prompt's n-grams, then
// every committed token's and every n-gram the window's columns complete) and the
// window (level 0 from the prompt's tail). The target leader keeps nothing, so a
// worker restart (Reset) loses nothing, and the state goes with the sequence.
// W, N, G are the request's (ResolvedSpeculation::lookahead); the W and G it left unset
// are caps within which each step is sized to the phase's verify cost (FitCandidates,
// spec/lookahead_sizing.h), from the outcomes the pool's guesses would have had: every
// step records the guesses the pool holds for its key, and once the N - 1 tokens after
// the key are committed, how far each matched them.
#ifndef TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_PROPOSER_H_
#define TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_PROPOSER_H_

#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "coordinator/proposers/lookahead_metrics.h"
#include "coordinator/proposers/lookahead_window.h"
#include "coordinator/proposers/proposer.h"
#include "spec/lookahead_sizing.h"

namespace tandem::coordinator {

// The per-sequence state (exposed for tests and metrics).
struct LookaheadState : ProposerState {
  LookaheadState(const LookaheadConfig& config, const std::vector<int32_t>& prompt);
  LookaheadConfig config;
  NgramPool pool;
  JacobiWindow window;
  // The step shape (window columns, guesses) within the config's caps.
  spec::LookaheadSizer sizer;
  // The guesses the pool held for a step's key (token index), at most G, with their
  // sources, and the window columns that step ran (0: none); evaluated once the N - 1
  // tokens after the key are committed (at most N - 1 are pending).
  struct PendingGuesses {
    int key_index = 0;
    int live_window = 0;
    std::vector<std::vector<int32_t>> guesses;
    std::vector<int> sources;
  };
  std::deque<PendingGuesses> pending;
};

class LookaheadProposer final : public Proposer {
 public:
  // `metrics` (may be null) records lookups, pool sizes and accepted lengths.
  explicit LookaheadProposer(std::shared_ptr<LookaheadMetrics> metrics = nullptr)
      : metrics_(std::move(metrics)) {}

  v1::SpeculationMethod method() const override { return v1::SPECULATION_METHOD_LOOKAHEAD; }
  ProposerCapabilities capabilities() const override {
    ProposerCapabilities c;
    c.site = ProposerSite::kTargetLeader;
    c.makes_trees = true;
    return c;
  }
  std::unique_ptr<ProposerState> NewState(const Sequence& s) const override;
  const char* Unusable(const Sequence& s, const ProposerState& state,
                       const WorkerAvailability& workers,
                       const PlannerOptions& options) const override {
    return nullptr;
  }
  // The request's nodes per step, (W + G) * (N - 1), capped by options.max_k.
  int MaxK(const Sequence& s, const PlannerOptions& options) const override;
  // Keeps the pool in step (committed n-grams; the window's columns when `result`
  // carries the Jacobi update of the window `verified` held), feeds the sizer the
  // guesses whose outcome is now known, then returns the next step in the sizer's
  // current shape: the guesses for the last committed token and the window, at most
  // remaining() - 1 nodes (the window left out when it does not fit); nullopt when
  // that is empty.
  std::optional<Candidates> OnVerified(const Sequence& s, ProposerState& state,
                                       const Candidates& verified,
                                       const v1::VerifiedSequence& result,
                                       int committed) const override;
  // Chooses the step's shape for `verify_cost` (the sizer, unless W and G are both
  // fixed) and rebuilds s->candidates when it changed (empty for plain decoding).
  void FitCandidates(Sequence* s, ProposerState& state,
                     const spec::VerifyCostFn& verify_cost) const override;

 private:
  // The next step of `la`'s current shape for `s` (resizing the window to it); nullopt
  // when empty.
  std::optional<Candidates> NextStep(const Sequence& s, LookaheadState& la) const;

  std::shared_ptr<LookaheadMetrics> metrics_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_PROPOSER_H_
