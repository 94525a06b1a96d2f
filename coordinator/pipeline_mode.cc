#include "coordinator/pipeline_mode.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem::coordinator {

const char* PipelineModeLabel(PipelineMode mode) {
  switch (mode) {
    case PipelineMode::kSequential:
      return "sequential";
    case PipelineMode::kLockstep:
      return "lockstep";
    case PipelineMode::kPingPong:
      return "ping_pong";
  }
  return "sequential";
}

double PipelinePrediction::Of(PipelineMode mode) const {
  switch (mode) {
    case PipelineMode::kSequential:
      return sequential_ms;
    case PipelineMode::kLockstep:
      return lockstep_ms;
    case PipelineMode::kPingPong:
      return ping_pong_ms;
  }
  return sequential_ms;
}

PipelinePrediction PredictRoundTimes(const PipelineInputs& in) {
  const double n = std::max(0.0, in.batch);
  const double k = std::max(0.0, in.k);
  const double h = std::clamp(in.hit_rate, 0.0, 1.0);
  const double o = std::max(0.0, in.phase_overhead_ms);
  const double sv = std::max(1.0, in.verify_slowdown), sd = std::max(1.0, in.draft_slowdown);
  // A verify of `sequences` next to a draft of `tokens`, both slowed by the overlap.
  const auto overlapped = [&](double sequences, double tokens) {
    return std::max(sv * in.verify.At(sequences * (k + 1), sequences), sd * in.draft.At(tokens));
  };
  PipelinePrediction p;
  const double verify = in.verify.At(n * (k + 1), n);
  const double draft = in.draft.At(n * k);
  p.sequential_ms = draft + verify + 2 * o;
  p.lockstep_ms = in.continuations ? overlapped(n, n * std::max(1.0, in.fanout) * (k + 1)) +
                                         (1 - h) * (draft + o) + o
                                   : p.sequential_ms;
  if (n >= 2) {
    const double n1 = std::ceil(n / 2), n2 = n - n1;
    p.ping_pong_ms = overlapped(n1, n2 * k) + overlapped(n2, n1 * k) + 2 * o;
  } else {
    p.ping_pong_ms = std::numeric_limits<double>::infinity();
  }
  return p;
}

PipelineDecision PipelineModeSelector::Choose(const PipelineInputs& in) {
  PipelineDecision d;
  d.prediction = PredictRoundTimes(in);
  const double sequential = d.prediction.sequential_ms;
  const auto eligible = [&](PipelineMode m) {
    return m == PipelineMode::kSequential ||
           d.prediction.Of(m) * (1 + hysteresis_.min_gain) <= sequential;
  };
  PipelineMode next = mode_;
  if (in.batch < 1 || in.k <= 0) {
    next = PipelineMode::kSequential;
  } else {
    PipelineMode best = PipelineMode::kSequential;
    for (PipelineMode m : {PipelineMode::kLockstep, PipelineMode::kPingPong}) {
      if (eligible(m) && d.prediction.Of(m) < d.prediction.Of(best)) best = m;
    }
    const double incumbent = d.prediction.Of(mode_);
    if (!eligible(mode_)) {
      next = best;  // Never keep a modelled loss (or a gain too small to pay).
    } else if (best != mode_ && held_ >= hysteresis_.min_hold_phases &&
               d.prediction.Of(best) * (1 + hysteresis_.switch_margin) < incumbent) {
      next = best;
    }
  }
  held_ = next == mode_ ? held_ + 1 : 1;
  mode_ = next;
  d.mode = next;
  const double t = d.prediction.Of(next);
  d.predicted_gain = t > 0 && std::isfinite(t) ? d.prediction.sequential_ms / t - 1 : 0.0;
  return d;
}

}  // namespace tandem::coordinator
