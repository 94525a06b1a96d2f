// The speculation controller: per sequence, picks which proposer to use and how many
// candidates K to verify (K = 0: plain decoding) so as to maximise the expected
// committed tokens per unit of time, from measured terms (docs/architecture.md §3):
//
//   S(m, K) = E_m(K) / (K c_m + nu(K) + o_m),   S(plain) = 1,
//   E_m(K)  = 1 + sum_{j=1..K} prod_{i=1..j} a_m(i)
//
// with a_m(i) the probability that proposal i of method m is accepted once proposals
// 1..i-1 were (per position, so a draft whose agreement fades with depth is modelled as
// such), c_m its proposing cost per token, o_m its fixed cost per step, and nu(K) the
// verify cost of K + 1 positions per sequence at the current batch size, all relative
// to one plain target step of that batch.
//
// Acceptance: per method and position, discounted counts of the sequence's own steps
// with that method (PositionAcceptance: each new step weighs `forgetting` against the
// past), shrunk towards a server-wide estimate of the same method (another
// PositionAcceptance fed by every sequence) worth `prior_weight` trials; a deeper
// position is shrunk towards the estimate of the one before it, so a position with
// little evidence looks like its predecessor. The mean is what was last seen; the
// evidence of a method not used for a while counts for less (its counts age by
// `forgetting` per step without it), which makes it uncertain again (for probes) and
// lets the next observation of it dominate.
//
// Hysteresis: the incumbent choice is kept unless another beats it by `switch_margin`
// (relative); plain decoding is left only for S >= 1 + enter_margin (a gain larger than
// the model's error), reached without a cost_factor below 1 (a calibration crediting
// speculation with more than modelled ranks options against each other but does not
// let them in: at concurrency 4 such a credit, 0.96 from a few noisy phases, turned
// the draft on for 28 % of steps that then lost 2 %), while a speculative incumbent whose S falls
// below 1 is dropped at once (never keep a loss). A tree option (ControllerOption::tree) is ranked
// at S / (1 + tree_margin) against the others, everywhere the choice compares options: its modelled
// S is the most optimistic of the options (more terms estimated from fewer trials), and choosing
// the largest of noisy estimates picks the overestimated ones (the winner's curse; bench/README.md,
// "Trees against chains"). Its reported S stays the model's. Exploration: an option that is not
// chosen is tried (a probe, K <= probe_max_k) only when its aged evidence is thin (fewer than
// probe_min_trials at position 1) and its optimistic value (aged estimate + probe_z standard
// deviations) would beat the choice by the margin, within a token bucket that fills by
// probe_fraction / batch^2 a step (batch: the sequences sharing the target step,
// ControllerInputs::batch) and that each probe drains by its modelled cost in plain steps (at least
// 1), its whole switch cost included: an expensive probe (a draft that must first catch up on a
// long context) is that much rarer, and once the server knows the method
// (server_known_trials), one the bucket could not repay over the tokens the sequence
// has left (ControllerInputs::tokens_left) is not taken: without that, a 64-token
// request drew its one catch-up probe (about 3 plain steps) into a debt it never
// repaid, ~5 % of its time where 1/32 was meant. On a server that has seen little of the
// method a probe may still go into debt: what it finds seeds the server-wide estimate
// every later request starts from (on a fresh cluster, a probe in the second of three
// short requests is what turned the draft on for the third). A probe's rows and draft work slow the
// step of the whole batch, while what it can find speeds up one of its n sequences, so exploration
// takes at most about probe_fraction / n of the batch's time (each sequence probes n^2 times less
// often than alone): where nothing pays, that share is the loss. A probe deferred while its worker
// catches up is paid at once and completed by the next Choose. Switching costs: an option whose
// worker must first be fed tokens it has not seen (a draft that was off for a while) carries a
// one-off switch_cost. The mean estimates spread it over the steps the sequence has left,
// tokens_left / E_m(K), so a proposer that would catch up on a long context to serve a short
// remainder is not chosen; a probe pays it whole (a probe is one step). A choice the caller
// deferred (its worker was fed this step instead; ControllerChoice::deferred) moves neither the
// incumbent nor the probe budget: the next Choose decides again with the smaller switch cost.
// Outputs never depend on the choice (acceptance rules, docs/architecture.md §4).
//
// Pure and deterministic; no I/O. Not thread-safe: one controller per sequence.
#ifndef TANDEM_SPEC_SPECULATION_CONTROLLER_H_
#define TANDEM_SPEC_SPECULATION_CONTROLLER_H_

#include <vector>

#include "absl/status/status.h"
#include "spec/cost_model.h"

namespace tandem {
namespace spec {

// Discounted per-position acceptance counts of one method, positions 1..max_k.
class PositionAcceptance {
 public:
  // `forgetting` in (0, 1]: weight kept by the past at each Observe.
  PositionAcceptance(int max_k, double forgetting);

  // One step that verified `proposed` proposals of which the first `accepted` were
  // accepted (clamped to [0, proposed]): positions 1..accepted + 1 (at most proposed)
  // were tried, 1..accepted accepted. The past is weighed by `forgetting` first.
  // proposed <= 0: no-op.
  void Observe(int proposed, int accepted);
  // Multiplies every count by `factor` in [0, 1] (ages the evidence).
  void Scale(double factor);

  // Discounted trials / accepts at `position` (1-based); 0 outside [1, max_k].
  double trials(int position) const;
  double accepts(int position) const;
  int max_k() const { return static_cast<int>(trials_.size()); }

 private:
  double forgetting_;
  std::vector<double> trials_, accepts_;
};

struct ControllerConfig {
  int max_k = 8;                     // [1, 256]: positions tracked, largest K chosen.
  double initial_acceptance = 0.6;   // [0, 1]: per-position acceptance before any data.
  double prior_weight = 4;           // > 0: trials the server-wide estimate is worth.
  double forgetting = 0.95;          // (0, 1]: own evidence kept per step.
  double server_forgetting = 0.995;  // (0, 1]: server-wide evidence kept per observation.
  double switch_margin = 0.05;       // >= 0: relative gain needed to change the choice.
  // >= 0: modelled gain needed to leave plain decoding (S >= 1 + enter_margin): above
  // the cost model's measured error (10-15 % between predicted and measured speedups),
  // so that speculation is turned on only where it pays for certain.
  double enter_margin = 0.15;
  // >= 0: relative gain a tree option needs over the other choices to be chosen (its S
  // is ranked at S / (1 + tree_margin)).
  double tree_margin = 0.15;
  double probe_fraction = 1.0 / 32;  // [0, 1]: most of the time spent on probes alone.
  double probe_min_trials = 3;       // Probe only below this many own trials at pos. 1.
  double probe_z = 1.5;              // >= 0: standard deviations of optimism in a probe.
  int probe_max_k = 2;               // >= 1: largest K of a probe.
  // >= 0: server-wide trials at position 1 from which the server knows a method, and a
  // probe of it must be repayable within the sequence's tokens left (before, a probe
  // may go into debt: what it finds also seeds every later request's estimate).
  double server_known_trials = 64;
};

// INVALID_ARGUMENT naming the field when a value is outside the ranges above.
absl::Status ValidateControllerConfig(const ControllerConfig& config);

// One proposer the sequence may use this step (index = its slot in the sequence's
// chain, preference order).
struct ControllerOption {
  bool usable = false;    // False: it cannot propose this step (worker down, ...).
  int max_k = 0;          // Largest K allowed for it now (caps of the request, contexts).
  double draft_cost = 0;  // c, per proposed token, relative to a plain step.
  double overhead = 0;    // o, per speculative step, relative to a plain step.
  // Server-wide acceptance of its method (null: only initial_acceptance as prior).
  const PositionAcceptance* server = nullptr;
  // One-off cost of using it now (feeding its worker what it has not seen), relative to
  // a plain step; 0 when it is in step with the sequence.
  double switch_cost = 0;
  // Proposals a step of depth K verifies, per unit of K (>= 1): 1 for chains, a tree
  // proposer's nodes per depth. A step is charged c and nu at round(K * this) proposals
  // (at least K) while its expected tokens follow the depth K.
  double nodes_per_depth = 1.0;
  // A tree-shaped option (ranked with ControllerConfig::tree_margin).
  bool tree = false;
  // Measured factor by which a step with this option costs more (> 1: what the terms
  // miss, contention for cores, wake-ups) or less (< 1: a pessimistic model, e.g. draft
  // time that pipelining hides) than K c + nu(K) + o; the caller bounds it (the realized
  // calibration: [0.8, 4]); not finite or <= 0 counts as 1.
  double cost_factor = 1.0;
};

struct ControllerInputs {
  std::vector<ControllerOption> options;
  // nu(K) at the current batch size (nu(0) = 1). Empty: nu = 1.
  VerifyCostFn verify_cost;
  // Tokens the sequence may still generate (spreads switch costs, bounds what a probe
  // may cost); <= 0: unknown, a switch cost is then spread over one step and a probe's
  // cost is not bounded by it.
  int tokens_left = 0;
  // Sequences sharing the target step (>= 1; smaller counts as 1): the probe budget
  // fills by probe_fraction / batch^2 a step.
  int batch = 1;
};

struct ControllerChoice {
  int option = -1;       // Slot chosen, -1 = plain decoding.
  int k = 0;             // 0 iff option == -1.
  bool probe = false;    // An exploration step, not the best by the estimates.
  double speedup = 1.0;  // Modelled S of this choice (by the mean estimates).
  // The same S with the option's cost_factor taken as 1 (set by Choose): the cost model's
  // own prediction, which a calibration on realized outcomes compares with. Calibrating
  // against `speedup` (already divided by the factor in use) would converge to the square
  // root of the model's error.
  double uncalibrated_speedup = 1.0;
  // True when plain decoding was chosen although some option was usable with K >= 1
  // (the cost model says speculation does not pay now).
  bool off_by_model = false;
  // Set by the caller, not by Choose: the choice did not run this step (its worker was
  // being fed what it lacked); the step was plain decoding.
  bool deferred = false;
  // A probe's modelled cost in plain steps (its step's cost and its whole switch cost),
  // what it spends of the probe budget; and whether it was paid already (the probe
  // was deferred while its worker caught up, and is now completed).
  double cost = 0;
  bool prepaid = false;
  // What the step adds to the probe budget, probe_fraction / batch^2 (set by Choose;
  // < 0: probe_fraction, for a choice not made by Choose).
  double budget_fill = -1;
};

// E = 1 + sum_j prod_{i<=j} a(i) for K = min(k, a.size()) positions, a clamped to [0, 1].
double ExpectedTokensFromPositions(const std::vector<double>& acceptance, int k);

class SpeculationController {
 public:
  explicit SpeculationController(ControllerConfig config = ControllerConfig());

  // The choice for the next step. Const: calling it again before Observe gives the
  // same answer (the planner may ask more than once per step).
  ControllerChoice Choose(const ControllerInputs& inputs) const;

  // After the step: `chosen` is what Choose returned for it; option `used` (-1: none)
  // verified `proposed` proposals of which `accepted` were accepted. Records the step
  // (the used option's evidence first aged by the steps it was not used), moves the
  // incumbent and the probe budget (neither for a deferred choice).
  void Observe(const ControllerChoice& chosen, int used, int proposed, int accepted);

  // Mean acceptance estimate at `position` (1-based) of option `option` given its
  // server-wide estimate `server` (may be null).
  double Acceptance(int option, int position, const PositionAcceptance* server) const;

 private:
  struct Value {
    int k = 0;
    double speedup = 1.0;
  };
  // What a step adds to the probe budget: probe_fraction / batch^2.
  double BudgetFill(const ControllerInputs& inputs) const;
  // The probe of this step: the option other than `chosen_option` whose own evidence is
  // thin and whose optimistic rank beats `to_beat` the most, among those whose cost the
  // probe budget can repay over the tokens left (option -1: none).
  ControllerChoice ChooseProbe(const ControllerInputs& inputs, int chosen_option,
                               double to_beat) const;
  // Choose without the budget fill.
  ControllerChoice ChooseOption(const ControllerInputs& inputs) const;
  // The rank `choice` leaves plain decoding at: its rank with a cost_factor below 1
  // taken as 1 (a calibration that reads speculation as cheaper than modelled may rank
  // the options, but never lets them in).
  double EntryRank(const ControllerInputs& inputs, const ControllerChoice& choice) const;
  // The value `speedup` of `option` ranks at against the other choices (plain: 1).
  double Rank(const ControllerInputs& inputs, int option, double speedup) const;
  // Acceptance at positions 1..k of `option`: the mean estimates, or (optimistic) the
  // estimates with its own evidence aged by the steps since it was last used, raised by
  // probe_z standard deviations.
  std::vector<double> Estimates(int option, const PositionAcceptance* server, int k,
                                bool optimistic) const;
  // The best K in [1, max_k] of `option` (ties to the smaller K) by the mean estimate,
  // or (optimistic) by the aged estimate plus probe_z standard deviations.
  Value Best(int option, const ControllerOption& o, const ControllerInputs& in, int max_k,
             bool optimistic) const;
  // Cost of a step of `option` at `k` in plain steps: cost_factor (K c + nu(K) + o)
  // plus the switch cost divided by `switch_steps`.
  double StepCost(const ControllerOption& o, const ControllerInputs& in, int k,
                  double switch_steps) const;
  // S of `option` at `k` (1 for k <= 0), by the mean estimate with its switch cost
  // spread over the steps left, or by the optimistic estimate paying it whole.
  double ValueOf(int option, const ControllerOption& o, const ControllerInputs& in, int k,
                 bool optimistic) const;
  // Own discounted trials of `option` at `position` (0 before any observation), aged
  // by the steps since its last use when `aged`.
  double OwnTrials(int option, int position, bool aged) const;
  double Staleness(int option) const;  // forgetting^(steps since last used).

  ControllerConfig config_;
  std::vector<PositionAcceptance> own_;  // Per option slot, grown on demand.
  std::vector<long> last_used_;          // Step each option was last observed at.
  long step_ = 0;                        // Steps observed.
  int incumbent_option_ = -1;
  int incumbent_k_ = 0;
  double probe_budget_ = 0;
  int pending_probe_ = -1;  // Option of a paid probe deferred by a catch-up, or -1.
};

}  // namespace spec
}  // namespace tandem

#endif  // TANDEM_SPEC_SPECULATION_CONTROLLER_H_
