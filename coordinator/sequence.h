// One request inside the engine: its tokens (the coordinator owns the committed
// tokens of every sequence), what each worker has cached, the proposals waiting for
// verification, and the conversion of committed tokens into streamed output (EOS,
// max_new_tokens, stop strings, incremental detokenisation).
//
// Owned and used by the engine thread only, except `cancelled`, which the RPC
// handler sets.
#ifndef TANDEM_COORDINATOR_SEQUENCE_H_
#define TANDEM_COORDINATOR_SEQUENCE_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/output_channel.h"
#include "coordinator/proposers/candidates.h"
#include "coordinator/proposers/proposer.h"
#include "coordinator/request_validation.h"
#include "coordinator/stop_matcher.h"
#include "model/tokenizer.h"
#include "spec/speculation_controller.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

struct SequenceStats {
  int draft_tokens_proposed = 0;
  int draft_tokens_accepted = 0;
  int target_steps = 0;       // Verify steps (each commits 1..K+1 tokens).
  int speculative_steps = 0;  // Steps that verified at least one proposal.
  int fallback_steps = 0;     // Steps without the requested proposer.
  // Steps that verified candidates of each method.
  std::map<v1::SpeculationMethod, int> steps_by_method;
  // Steps that verified no proposal, by PlannedStep::off_reason ("no_candidates" when
  // the planned proposer had nothing to propose).
  std::map<std::string, int> off_steps;
  std::vector<int> steps_by_k;       // [K] = steps that verified K proposals.
  int probe_steps = 0;               // Steps the controller ran as probes.
  int predrafted_steps = 0;          // Steps whose candidates were pre-drafted.
  int tree_steps = 0;                // Steps that verified a proposer's tree option.
  double predicted_speedup_sum = 0;  // Modelled S of the controller's choices, summed.
  int predicted_steps = 0;           // Steps with a controller choice.
  absl::Time arrival;
  absl::Time admitted;
  absl::Time first_token;
  absl::Time last_token;
};

// What the planner decided for a sequence's next step (set every phase it plans it;
// the verify that follows is accounted against the last one).
struct PlannedStep {
  // The controller's choice; option -1 and `from_controller` false for fixed-K requests
  // and steps decided before the controller was asked.
  spec::ControllerChoice choice;
  bool from_controller = false;
  // Why the step verifies no proposal when it does not speculate: "controller" (the
  // cost model chose K = 0), a proposer's Unusable() reason ("draft_down", ...),
  // "batch_limit", "draft_catch_up" (the proposer's worker is fed meanwhile; the
  // choice is deferred), "candidates_pending" (a target-leader proposer's candidates
  // come with this step's verify; deferred too), "length" (no room before max_new_tokens or a
  // context), "not_requested" (method NONE). nullptr when a proposer was chosen.
  const char* off_reason = nullptr;
};

// The speculation controller's options: two per chain slot, the slot's chain (or only
// shape) and its tree when the proposer offers the choice (Proposer::OffersTreeChoice).
constexpr int kShapesPerSlot = 2;
inline int ControllerOptionOf(int slot, bool tree) {
  return slot * kShapesPerSlot + (tree ? 1 : 0);
}

class Sequence {
 public:
  // `prompt` is the tokenised prompt (BOS included when wanted); `max_new_tokens`
  // is already clamped to the context. `tokenizer` must outlive the sequence. Output
  // ends (FINISH_REASON_EOS) at any of `stop_token_ids` unless the request ignores EOS.
  Sequence(uint64_t id, ValidatedRequest request, std::vector<int32_t> prompt, int max_new_tokens,
           const Tokenizer* tokenizer, std::vector<int> stop_token_ids,
           const spec::ControllerConfig& controller, absl::Time arrival,
           std::shared_ptr<OutputChannel> output);

  uint64_t id() const { return id_; }
  const ValidatedRequest& request() const { return request_; }
  // Prompt followed by every committed generated token.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int prompt_length() const { return prompt_length_; }
  int generated() const { return static_cast<int>(tokens_.size()) - prompt_length_; }
  // Tokens that may still be generated.
  int remaining() const { return max_new_tokens_ - generated(); }
  bool finished() const { return finished_; }
  const SequenceStats& stats() const { return stats_; }
  SequenceStats& mutable_stats() { return stats_; }
  // Chooses method and K of adaptive-K steps (the planner asks it; OnVerified feeds it).
  const spec::SpeculationController& controller() const { return controller_; }
  const PlannedStep& planned_step() const { return planned_; }
  // Tokens per plain step the planned step is expected to commit: the controller's
  // modelled speedup of its choice, at least 1 (1 when the controller did not choose).
  double PlannedRate() const {
    return planned_.from_controller ? std::max(1.0, planned_.choice.speedup) : 1.0;
  }
  void SetPlannedStep(const PlannedStep& planned) { planned_ = planned; }

  // ---- worker caches ----
  // Tokens [0, target_cached) are in the target's cache. Always < tokens().size().
  int target_cached = 0;

  // ---- proposing ----
  // The proposers this sequence may use, in preference order, each with its state
  // (coordinator/proposers/proposer.h). Set once, before the first step.
  // `server_acceptance[slot]` (may be shorter than the chain, or hold nulls) is the
  // server-wide acceptance of that proposer's method, chains first then trees (the tree
  // option of a proposer that offers one), which OnVerified feeds and the controller uses
  // as prior; it must outlive the sequence.
  using ServerAcceptance = std::array<spec::PositionAcceptance*, 2>;
  void AttachProposers(const std::vector<const Proposer*>& chain,
                       const std::vector<ServerAcceptance>& server_acceptance = {});
  int chain_size() const { return static_cast<int>(chain_.size()); }
  const Proposer& proposer(int slot) const { return *chain_[slot].proposer; }
  ProposerState& proposer_state(int slot) const { return *chain_[slot].state; }
  // The server-wide acceptance of slot's method, of its chains or of its tree option
  // (null when none was attached).
  const spec::PositionAcceptance* server_acceptance(int slot, bool tree) const {
    return chain_[slot].server_acceptance[tree];
  }
  // Candidate nodes per unit of depth in slot's verified steps of that shape (moving
  // average; 1 for chains and before any step), the controller's nodes_per_depth.
  double nodes_per_depth(int slot, bool tree) const { return chain_[slot].nodes_per_depth[tree]; }
  // Proposed for the current tokens() and not yet verified (empty: none).
  Candidates candidates;
  // False when the draft worker cannot hold this sequence's KV (admission decided so):
  // draft-worker proposers are then never used for it.
  bool draft_allowed = true;
  // Set when the draft worker rejected a batch with this sequence: its next step runs
  // without draft-worker proposers, then the flag clears.
  bool skip_draft_once = false;

  // Applies a verify result for the `candidates` it verified (`proposed` of them):
  // commits its tokens (stopping at EOS, max_new_tokens or a stop string), updates
  // statistics, the controller and the target cache's bookkeeping, pushes output, and
  // lets every proposer of the chain see the step (one may supply the next candidates).
  void OnVerified(const v1::VerifiedSequence& result, int proposed, absl::Time now);

  // Ends the request with an error (status not OK) or as cancelled; pushes the final
  // chunk. No-op when already finished.
  void Fail(const absl::Status& status, absl::Time now);

  // Set by the RPC handler when the client goes away; the engine then ends the
  // sequence at its next step boundary.
  std::atomic<bool> cancelled{false};
  // Request deadline (InfiniteFuture when none).
  absl::Time deadline = absl::InfiniteFuture();
  // Time the target became unavailable while this sequence waited (for the
  // recovery timeout); InfinitePast when not waiting.
  absl::Time paused_since = absl::InfinitePast();

  // The generated-token index of the next token (keys the random streams).
  uint32_t sample_index() const { return static_cast<uint32_t>(generated()); }

  // Statistics in the public API's form.
  v1::RequestStats PublicStats(absl::Time now) const;
  // How the last verified step went, for metrics: "speculate", "probe", or the
  // off_steps reason it was counted under.
  const std::string& last_step_decision() const { return last_step_decision_; }

 private:
  // Appends the committed tokens of `result` one by one to tokens() and `chunk`, up to
  // the one that ends the output (EOS, max_new_tokens, a completed stop string); returns
  // why the output ended (UNSPECIFIED: it goes on, or the sequence failed).
  v1::FinishReason CommitTokens(const v1::VerifiedSequence& result, OutputChunk* chunk);
  // Pushes the final chunk. `text_done`: a stop string matched, nothing more to flush.
  void Finish(v1::FinishReason reason, absl::Time now, OutputChunk chunk, bool text_done);

  const uint64_t id_;
  const ValidatedRequest request_;
  const Tokenizer* tokenizer_;
  const std::vector<int> stop_token_ids_;
  const int prompt_length_;
  const int max_new_tokens_;
  std::vector<int32_t> tokens_;
  bool finished_ = false;
  SequenceStats stats_;
  spec::SpeculationController controller_;
  PlannedStep planned_;
  struct ProposerSlot {
    const Proposer* proposer;
    std::unique_ptr<ProposerState> state;
    ServerAcceptance server_acceptance;  // Chains, trees; not owned; may be null.
    std::array<double, 2> nodes_per_depth = {1.0, 1.0};
  };
  // Feeds the controller, the server-wide acceptance and the stats with a verified step.
  void AccountStep(const Candidates& verified, int proposed, int accepted);
  std::vector<ProposerSlot> chain_;
  IncrementalDetokenizer detokenizer_;
  StopMatcher stop_matcher_;
  std::shared_ptr<OutputChannel> output_;
  std::string last_step_decision_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SEQUENCE_H_
