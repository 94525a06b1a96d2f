#include "coordinator/proposers/lookahead_params.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::coordinator {
namespace {

absl::Status OutOfRange(const char* field, int value, int lo, int hi) {
  return absl::InvalidArgumentError(absl::StrCat("speculation.lookahead.", field, " = ", value,
                                                 " is out of range; valid range [", lo, ", ", hi,
                                                 "]"));
}

}  // namespace

LookaheadConfig DefaultLookaheadConfig() {
  LookaheadConfig c;
  c.window = 2;
  c.ngram = 3;
  c.max_guesses = 2;
  return c;
}

absl::StatusOr<LookaheadConfig> ResolveLookaheadParams(const v1::SpeculationParams& params,
                                                       v1::SpeculationMethod method,
                                                       int max_nodes) {
  const v1::LookaheadParams& p = params.lookahead();
  const bool lookahead = method == v1::SPECULATION_METHOD_LOOKAHEAD;
  if (params.has_lookahead() && !lookahead) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculation.lookahead is only used by SPECULATION_METHOD_LOOKAHEAD, but the method is ",
        v1::SpeculationMethod_Name(method), "; remove it or set speculation.method"));
  }
  LookaheadConfig c = DefaultLookaheadConfig();
  if (!lookahead) return c;
  if (p.has_window() && (p.window() < 1 || p.window() > kMaxLookaheadWindow)) {
    return OutOfRange("window", p.window(), 1, kMaxLookaheadWindow);
  }
  if (p.has_ngram() && (p.ngram() < kMinLookaheadNgram || p.ngram() > kMaxLookaheadNgram)) {
    return OutOfRange("ngram", p.ngram(), kMinLookaheadNgram, kMaxLookaheadNgram);
  }
  if (p.has_max_guesses() && (p.max_guesses() < 0 || p.max_guesses() > kMaxLookaheadGuesses)) {
    return OutOfRange("max_guesses", p.max_guesses(), 0, kMaxLookaheadGuesses);
  }
  if (p.has_window()) c.window = p.window();
  if (p.has_ngram()) c.ngram = p.ngram();
  c.max_guesses = p.has_max_guesses() ? p.max_guesses() : c.window;
  c.fixed_window = p.has_window();
  c.fixed_guesses = p.has_max_guesses();
  // Shrink what the request left to the server: G first, then W.
  while (LookaheadMaxNodes(c) > max_nodes) {
    if (!p.has_max_guesses() && c.max_guesses > 0) {
      --c.max_guesses;
    } else if (!p.has_window() && c.window > 1) {
      --c.window;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "speculation.lookahead: window ", c.window, " and max_guesses ", c.max_guesses,
          " with ngram ", c.ngram, " need (W + G) * (N - 1) = ", LookaheadMaxNodes(c),
          " nodes per step, over this server's max_speculative_tokens ", max_nodes,
          " (ModelInfo); lower them or raise the server's --max_k"));
    }
  }
  return c;
}

}  // namespace tandem::coordinator
