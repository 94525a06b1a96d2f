// A request's Lookahead parameters (tandem.proto LookaheadParams): validation, the
// server defaults and their fitting to the verify size the server allows.
#ifndef TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_PARAMS_H_
#define TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_PARAMS_H_

#include "absl/status/statusor.h"
#include "coordinator/proposers/lookahead_window.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::coordinator {

// Ranges of W, N and G (tandem.proto).
inline constexpr int kMaxLookaheadWindow = 64;
inline constexpr int kMinLookaheadNgram = 2;
inline constexpr int kMaxLookaheadNgram = 8;
inline constexpr int kMaxLookaheadGuesses = 64;

// The server defaults (bench/README.md, "Lookahead", has the measurement behind them).
LookaheadConfig DefaultLookaheadConfig();

// W, N, G of a request whose method is `method`: INVALID_ARGUMENT naming the field when
// `params.lookahead` is set for another method, a value is outside its range, or the
// explicit values need more than `max_nodes` (ModelInfo.max_speculative_tokens) nodes
// per step ((W + G) * (N - 1)). Unset fields take DefaultLookaheadConfig(), G = W when
// W is given; defaulted W and G shrink (G first, to W = 1, G = 0) until the step fits.
// The fields the request set are marked fixed (honoured exactly); the others are caps
// of the per-step sizing (spec/lookahead_sizing.h).
absl::StatusOr<LookaheadConfig> ResolveLookaheadParams(const v1::SpeculationParams& params,
                                                       v1::SpeculationMethod method, int max_nodes);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_LOOKAHEAD_PARAMS_H_
