#include "spec/speculation_controller.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace spec {
namespace {

double ClampUnit(double x) {
  if (!(x >= 0.0)) return 0.0;  // Also NaN.
  return std::min(x, 1.0);
}

bool InRange(double x, double lo, double hi) { return x >= lo && x <= hi; }

absl::Status Bad(const char* field, const char* range, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("speculation controller: ", field, " must be ", range, ", got ", value));
}

double VerifyCost(const VerifyCostFn& nu, int k) { return nu ? nu(k) : 1.0; }

// Proposals verified by a step of depth k of `o` (its nodes), >= k.
int VerifiedNodes(const ControllerOption& o, int k) {
  return std::max(k, static_cast<int>(std::lround(k * o.nodes_per_depth)));
}

// Whether option `i` may be chosen this step: it exists, is usable and allows K >= 1.
bool OpenOption(const ControllerInputs& in, int i) {
  return i >= 0 && i < static_cast<int>(in.options.size()) && in.options[i].usable &&
         in.options[i].max_k >= 1;
}

}  // namespace

PositionAcceptance::PositionAcceptance(int max_k, double forgetting)
    : forgetting_(std::clamp(forgetting, 1e-6, 1.0)),
      trials_(std::max(max_k, 0), 0.0),
      accepts_(std::max(max_k, 0), 0.0) {}

void PositionAcceptance::Scale(double factor) {
  factor = std::clamp(factor, 0.0, 1.0);
  for (double& t : trials_) t *= factor;
  for (double& a : accepts_) a *= factor;
}

void PositionAcceptance::Observe(int proposed, int accepted) {
  if (proposed <= 0) return;
  Scale(forgetting_);
  accepted = std::clamp(accepted, 0, proposed);
  const int tried = std::min(accepted + 1, proposed);
  for (int j = 0; j < tried && j < max_k(); ++j) trials_[j] += 1;
  for (int j = 0; j < accepted && j < max_k(); ++j) accepts_[j] += 1;
}

double PositionAcceptance::trials(int position) const {
  return position >= 1 && position <= max_k() ? trials_[position - 1] : 0.0;
}

double PositionAcceptance::accepts(int position) const {
  return position >= 1 && position <= max_k() ? accepts_[position - 1] : 0.0;
}

absl::Status ValidateControllerConfig(const ControllerConfig& c) {
  if (c.max_k < 1 || c.max_k > 256) return Bad("max_k", "in [1, 256]", c.max_k);
  if (!InRange(c.initial_acceptance, 0, 1)) {
    return Bad("initial_acceptance", "in [0, 1]", c.initial_acceptance);
  }
  if (!(c.prior_weight > 0) || !std::isfinite(c.prior_weight)) {
    return Bad("prior_weight", "finite and > 0", c.prior_weight);
  }
  if (!(c.forgetting > 0 && c.forgetting <= 1)) return Bad("forgetting", "in (0, 1]", c.forgetting);
  if (!(c.server_forgetting > 0 && c.server_forgetting <= 1)) {
    return Bad("server_forgetting", "in (0, 1]", c.server_forgetting);
  }
  if (!(c.switch_margin >= 0) || !std::isfinite(c.switch_margin)) {
    return Bad("switch_margin", "finite and >= 0", c.switch_margin);
  }
  if (!(c.enter_margin >= 0) || !std::isfinite(c.enter_margin)) {
    return Bad("enter_margin", "finite and >= 0", c.enter_margin);
  }
  if (!(c.tree_margin >= 0) || !std::isfinite(c.tree_margin)) {
    return Bad("tree_margin", "finite and >= 0", c.tree_margin);
  }
  if (!InRange(c.probe_fraction, 0, 1)) return Bad("probe_fraction", "in [0, 1]", c.probe_fraction);
  if (!(c.probe_min_trials >= 0) || !std::isfinite(c.probe_min_trials)) {
    return Bad("probe_min_trials", "finite and >= 0", c.probe_min_trials);
  }
  if (!(c.probe_z >= 0) || !std::isfinite(c.probe_z)) return Bad("probe_z", ">= 0", c.probe_z);
  if (c.probe_max_k < 1) return Bad("probe_max_k", ">= 1", c.probe_max_k);
  if (!(c.server_known_trials >= 0)) {
    return Bad("server_known_trials", ">= 0", c.server_known_trials);
  }
  return absl::OkStatus();
}

double ExpectedTokensFromPositions(const std::vector<double>& acceptance, int k) {
  double expected = 1.0, reach = 1.0;
  const int n = std::min<int>(std::max(k, 0), acceptance.size());
  for (int j = 0; j < n; ++j) {
    reach *= ClampUnit(acceptance[j]);
    expected += reach;
  }
  return expected;
}

SpeculationController::SpeculationController(ControllerConfig config) : config_(config) {
  config_.max_k = std::clamp(config_.max_k, 1, 256);
  config_.prior_weight = std::max(config_.prior_weight, 1e-6);
  config_.probe_max_k = std::max(config_.probe_max_k, 1);
}

double SpeculationController::Staleness(int option) const {
  if (option < 0 || option >= static_cast<int>(last_used_.size())) return 1.0;
  return std::pow(config_.forgetting, static_cast<double>(step_ - last_used_[option]));
}

double SpeculationController::OwnTrials(int option, int position, bool aged) const {
  if (option < 0 || option >= static_cast<int>(own_.size())) return 0.0;
  return own_[option].trials(position) * (aged ? Staleness(option) : 1.0);
}

std::vector<double> SpeculationController::Estimates(int option, const PositionAcceptance* server,
                                                     int k, bool aged) const {
  // Each position is shrunk towards the one before it (position 1 towards
  // initial_acceptance): a position with little evidence looks like its predecessor.
  const double w = config_.prior_weight, keep = aged ? Staleness(option) : 1.0;
  const PositionAcceptance* own =
      option >= 0 && option < static_cast<int>(own_.size()) ? &own_[option] : nullptr;
  std::vector<double> a(std::max(k, 0));
  double server_prior = ClampUnit(config_.initial_acceptance);
  double own_prior = server_prior;
  for (int j = 1; j <= k; ++j) {
    if (server != nullptr) {
      server_prior = (server->accepts(j) + w * server_prior) / (server->trials(j) + w);
    }
    // Position 1's prior is the server's view; deeper ones the own estimate before.
    const double prior = j == 1 ? server_prior : own_prior;
    const double accepts = own ? own->accepts(j) * keep : 0,
                 trials = own ? own->trials(j) * keep : 0;
    const double mean = ClampUnit((accepts + w * prior) / (trials + w));
    own_prior = mean;
    a[j - 1] = mean;
    if (aged) {  // Optimistic: probe_z standard deviations of the aged estimate up.
      a[j - 1] =
          ClampUnit(mean + config_.probe_z * std::sqrt(mean * (1 - mean) / (trials + w + 1)));
    }
  }
  return a;
}

double SpeculationController::Acceptance(int option, int position,
                                         const PositionAcceptance* server) const {
  if (position < 1) return 0.0;
  return Estimates(option, server, position, false)[position - 1];
}

double SpeculationController::ValueOf(int option, const ControllerOption& o,
                                      const ControllerInputs& in, int k, bool optimistic) const {
  if (k <= 0) return 1.0;
  const std::vector<double> a = Estimates(option, o.server, k, optimistic);
  const double expected = ExpectedTokensFromPositions(a, k);
  const double steps_left = optimistic ? 1.0 : std::max(1.0, in.tokens_left / expected);
  const double cost = StepCost(o, in, k, steps_left);
  return cost > 0 ? expected / cost : 0.0;
}

double SpeculationController::StepCost(const ControllerOption& o, const ControllerInputs& in, int k,
                                       double switch_steps) const {
  const int nodes = VerifiedNodes(o, k);
  const double step = nodes * std::max(o.draft_cost, 0.0) + VerifyCost(in.verify_cost, nodes) +
                      std::max(o.overhead, 0.0);
  const double factor = o.cost_factor > 0 && std::isfinite(o.cost_factor) ? o.cost_factor : 1.0;
  return factor * step + std::max(o.switch_cost, 0.0) / std::max(switch_steps, 1.0);
}

SpeculationController::Value SpeculationController::Best(int option, const ControllerOption& o,
                                                         const ControllerInputs& in, int max_k,
                                                         bool optimistic) const {
  Value best;
  for (int k = 1; k <= std::min(max_k, config_.max_k); ++k) {
    const double s = ValueOf(option, o, in, k, optimistic);
    if (best.k == 0 || s > best.speedup) best = {k, s};
  }
  return best;
}

ControllerChoice SpeculationController::Choose(const ControllerInputs& in) const {
  ControllerChoice choice = ChooseOption(in);
  choice.budget_fill = BudgetFill(in);
  choice.uncalibrated_speedup = choice.speedup;
  if (choice.option >= 0 && choice.k > 0) {
    ControllerOption uncalibrated = in.options[choice.option];
    uncalibrated.cost_factor = 1.0;
    choice.uncalibrated_speedup = ValueOf(choice.option, uncalibrated, in, choice.k, false);
  }
  return choice;
}

double SpeculationController::BudgetFill(const ControllerInputs& in) const {
  const double batch = std::max(in.batch, 1);
  return config_.probe_fraction / (batch * batch);
}

double SpeculationController::EntryRank(const ControllerInputs& in,
                                        const ControllerChoice& choice) const {
  if (choice.option < 0) return 1.0;
  ControllerOption o = in.options[choice.option];
  if (!(o.cost_factor < 1)) return Rank(in, choice.option, choice.speedup);
  o.cost_factor = 1;
  return Rank(in, choice.option, ValueOf(choice.option, o, in, choice.k, false));
}

double SpeculationController::Rank(const ControllerInputs& in, int option, double speedup) const {
  const bool tree =
      option >= 0 && option < static_cast<int>(in.options.size()) && in.options[option].tree;
  return tree ? speedup / (1 + std::max(config_.tree_margin, 0.0)) : speedup;
}

ControllerChoice SpeculationController::ChooseProbe(const ControllerInputs& in, int chosen_option,
                                                    double to_beat) const {
  const int n = static_cast<int>(in.options.size());
  // What the bucket can still collect over the tokens the sequence has left (each step
  // commits at least one): once the server knows the method (server_known_trials at
  // position 1), a probe whose cost that cannot repay is not taken, so a short request
  // does not spend more than probe_fraction of its time exploring; before, a probe
  // also teaches the server-wide estimate every later request starts from, and may go
  // into debt (unknown length: no limit either).
  const double collectable = in.tokens_left > 0 ? probe_budget_ + BudgetFill(in) * in.tokens_left
                                                : std::numeric_limits<double>::infinity();
  auto affordable = [&](const ControllerOption& o, double cost) {
    const bool server_knows =
        o.server != nullptr && o.server->trials(1) >= config_.server_known_trials;
    return !server_knows || cost <= collectable;
  };
  ControllerChoice probe;
  double probe_value = to_beat;
  for (int i = 0; i < n; ++i) {
    if (!OpenOption(in, i) || i == chosen_option ||
        OwnTrials(i, 1, true) >= config_.probe_min_trials) {
      continue;
    }
    const ControllerOption& o = in.options[i];
    const Value v = Best(i, o, in, o.max_k, true);
    const int k = std::min(v.k, config_.probe_max_k);
    const double cost = StepCost(o, in, k, 1.0);  // Its step and its whole switch cost.
    if (Rank(in, i, v.speedup) > probe_value && affordable(o, cost)) {
      probe_value = Rank(in, i, v.speedup);
      probe = {i, k, true, ValueOf(i, o, in, k, false), false};
      probe.cost = cost;
    }
  }
  return probe;
}

ControllerChoice SpeculationController::ChooseOption(const ControllerInputs& in) const {
  const int n = static_cast<int>(in.options.size());
  auto open = [&](int i) { return OpenOption(in, i); };
  // The best choice by the mean estimates (plain decoding is worth 1), by rank.
  ControllerChoice best;
  bool any_open = false;
  for (int i = 0; i < n; ++i) {
    if (!open(i)) continue;
    any_open = true;
    const Value v = Best(i, in.options[i], in, in.options[i].max_k, false);
    if (Rank(in, i, v.speedup) > Rank(in, best.option, best.speedup)) {
      best = {i, v.k, false, v.speedup, false};
    }
  }
  const double best_rank = Rank(in, best.option, best.speedup);
  // The incumbent (plain when its option cannot be used now), then hysteresis.
  ControllerChoice chosen;
  if (open(incumbent_option_)) {
    const ControllerOption& o = in.options[incumbent_option_];
    const int k = std::min(incumbent_k_, o.max_k);
    chosen = {incumbent_option_, k, false, ValueOf(incumbent_option_, o, in, k, false), false};
  }
  const double margin = 1 + config_.switch_margin, enter = 1 + config_.enter_margin;
  if (chosen.option < 0) {
    if (best_rank >= enter && EntryRank(in, best) >= enter) chosen = best;
  } else if (chosen.speedup < 1) {
    chosen = best.option >= 0 ? best : ControllerChoice();
  } else if (best_rank > Rank(in, chosen.option, chosen.speedup) * margin) {
    chosen = best;
  }
  // A probe: another option whose own evidence is thin and whose optimistic value
  // would beat the choice by the margin.
  // A paid probe deferred while its worker caught up is completed first.
  if (open(pending_probe_) && pending_probe_ != chosen.option) {
    const ControllerOption& o = in.options[pending_probe_];
    const int k = std::min(Best(pending_probe_, o, in, o.max_k, true).k, config_.probe_max_k);
    ControllerChoice probe{pending_probe_, k, true, ValueOf(pending_probe_, o, in, k, false),
                           false};
    probe.prepaid = true;
    return probe;
  }
  if (probe_budget_ >= 1) {
    const double to_beat =
        chosen.option < 0 ? enter : Rank(in, chosen.option, chosen.speedup) * margin;
    const ControllerChoice probe = ChooseProbe(in, chosen.option, to_beat);
    if (probe.option >= 0) return probe;
  }
  chosen.off_by_model = chosen.option < 0 && any_open;
  return chosen;
}

void SpeculationController::Observe(const ControllerChoice& chosen, int used, int proposed,
                                    int accepted) {
  ++step_;
  if (used >= 0 && proposed > 0) {
    if (used >= static_cast<int>(own_.size())) {
      own_.resize(used + 1, PositionAcceptance(config_.max_k, config_.forgetting));
      last_used_.resize(used + 1, step_ - 1);
    }
    // Aged by the steps it was not used (Observe itself weighs the past once more).
    own_[used].Scale(
        std::pow(config_.forgetting, static_cast<double>(step_ - 1 - last_used_[used])));
    own_[used].Observe(proposed, accepted);
    last_used_[used] = step_;
  }
  probe_budget_ = std::min(
      1.0, probe_budget_ + (chosen.budget_fill >= 0 ? chosen.budget_fill : config_.probe_fraction));
  // A probe drains the bucket by its cost (into debt): paid when it is decided, even
  // if deferred by a catch-up, which the next Choose then completes unpaid.
  if (chosen.probe && !chosen.prepaid) probe_budget_ -= std::max(1.0, chosen.cost);
  pending_probe_ = chosen.probe && chosen.deferred ? chosen.option : -1;
  if (chosen.deferred || chosen.probe) return;
  incumbent_option_ = chosen.option;
  incumbent_k_ = chosen.k;
}

}  // namespace spec
}  // namespace tandem
