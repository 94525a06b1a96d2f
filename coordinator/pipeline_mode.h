// The pipelining mode of a phase (docs/architecture.md §3, "Modes"), chosen from the
// measured call-time fits of what each mode would run, with hysteresis. Pure and
// deterministic; no I/O.
//
// A *round* is the time in which every running sequence takes one target step. For a
// batch of n sequences proposing K tokens each on the draft worker (K may be a mean),
// with V(rows) the predicted verify call time of a batch of those sequences (a linear
// fit in rows and sequences) and D(tokens) the predicted draft call time (linear, ms), o the
// coordinator's time per phase, and s_v, s_d >= 1 the measured slowdowns of a verify and a draft
// call while the other worker runs one (coordinator/relative_slowdown.h: co-located processes share
// cores):
//  * sequential: D(nK) + V(n(K+1)) + 2o (draft phase, then verify phase);
//  * lockstep with pre-drafting: B outcomes per sequence (about K+1 tokens each) are
//    drafted while the target verifies, and a hit (rate h, measured) makes the next
//    draft phase unnecessary:
//    max(s_v V(n(K+1)), s_d D(nB(K+1))) + (1 - h)(D(nK) + o) + o;
//  * ping-pong (n >= 2): two halves n1 = ceil(n/2), n2 = floor(n/2), each verified
//    while the other is drafted:
//    max(s_v V(n1(K+1)), s_d D(n2 K)) + max(s_v V(n2(K+1)), s_d D(n1 K)) + 2o.
//    It doubles the target steps and hides the draft calls.
// The predicted gain of a mode is T(sequential) / T(mode) - 1.
#ifndef TANDEM_COORDINATOR_PIPELINE_MODE_H_
#define TANDEM_COORDINATOR_PIPELINE_MODE_H_

namespace tandem::coordinator {

enum class PipelineMode { kSequential = 0, kLockstep = 1, kPingPong = 2 };
inline constexpr int kNumPipelineModes = 3;

// Metrics label: "sequential", "lockstep" or "ping_pong".
const char* PipelineModeLabel(PipelineMode mode);

// A call's time as a linear function of its size: intercept + per_unit * units +
// per_sequence * sequences, ms.
struct CallCost {
  double intercept_ms = 0;
  double per_unit_ms = 0;
  double per_sequence_ms = 0;
  double At(double units, double sequences = 0) const {
    return intercept_ms + per_unit_ms * units + per_sequence_ms * sequences;
  }
};

struct PipelineInputs {
  CallCost verify;   // Per row verified (tokens fed + proposals) and per sequence.
  CallCost draft;    // Per token proposed.
  double batch = 0;  // Sequences stepping per round, n (< 1: nothing to pipeline).
  double k = 0;      // Proposals per sequence step on the draft worker, >= 0 (a mean).
  // Whether lockstep drafts continuations (optimistic on, batch within its limit);
  // without them lockstep is sequential.
  bool continuations = false;
  // Share of continuations that supply the next step's proposals, [0, 1] (measured).
  double hit_rate = 0;
  // Outcomes pre-drafted per sequence (B >= 1, a mean: the measured fan-out).
  double fanout = 1;
  // The coordinator's own time per phase, ms (>= 0): every mode runs two phases a
  // round except a lockstep hit, which runs one.
  double phase_overhead_ms = 0;
  // A verify / draft call's time while the other worker runs a call, relative to the
  // same call alone (measured; values below 1 count as 1).
  double verify_slowdown = 1;
  double draft_slowdown = 1;
};

// Predicted round time of each mode, ms (see above); ping_pong_ms is +inf for n < 2.
struct PipelinePrediction {
  double sequential_ms = 0;
  double lockstep_ms = 0;
  double ping_pong_ms = 0;
  double Of(PipelineMode mode) const;
};

PipelinePrediction PredictRoundTimes(const PipelineInputs& in);

struct PipelineHysteresis {
  // Another mode replaces the incumbent only when its round is this much shorter
  // (fraction of its own time), >= 0.
  double switch_margin = 0.05;
  // ... and only after the incumbent held this many phases (>= 0).
  int min_hold_phases = 8;
  // A pipelined mode runs only while predicted at least this gain over sequential
  // (>= 0): below it the overlap is not worth its unmodelled costs (the extra calls,
  // contention for cores).
  double min_gain = 0.02;
};

struct PipelineDecision {
  PipelineMode mode = PipelineMode::kSequential;
  double predicted_gain = 0;  // T(sequential) / T(mode) - 1 (0 for sequential).
  PipelinePrediction prediction;
};

// Chooses the mode of each phase. Rules: nothing to overlap (n < 1 or K <= 0) means
// sequential; a pipelined mode is eligible only with a predicted gain >= min_gain (the
// best mode is the fastest eligible one, sequential when none is); an incumbent that is
// not eligible is left at once for the best mode (never keep a modelled loss);
// otherwise the best mode replaces the incumbent only when it is `switch_margin`
// faster and the incumbent held `min_hold_phases`. Ties prefer sequential, then
// lockstep. The selector starts sequential.
class PipelineModeSelector {
 public:
  explicit PipelineModeSelector(const PipelineHysteresis& hysteresis) : hysteresis_(hysteresis) {}

  // The decision for the next phase; counts it as a phase held by its mode.
  PipelineDecision Choose(const PipelineInputs& in);
  PipelineMode mode() const { return mode_; }

 private:
  PipelineHysteresis hysteresis_;
  PipelineMode mode_ = PipelineMode::kSequential;
  int held_ = 0;  // Phases the current mode has run.
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PIPELINE_MODE_H_
