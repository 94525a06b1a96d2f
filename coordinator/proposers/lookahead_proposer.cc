#include "coordinator/proposers/lookahead_proposer.h"

#include <algorithm>
#include <vector>

#include "absl/types/span.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator {

LookaheadState::LookaheadState(const LookaheadConfig& config, const std::vector<int32_t>& prompt)
    : config(config),
      pool(config.ngram, config.max_guesses),
      window(config.window, config.ngram - 1, prompt) {
  pool.AddAll(prompt);
}

std::unique_ptr<ProposerState> LookaheadProposer::NewState(const Sequence& s) const {
  return std::make_unique<LookaheadState>(s.request().speculation.lookahead, s.tokens());
}

int LookaheadProposer::MaxK(const Sequence& s, const PlannerOptions& options) const {
  return std::min(options.max_k, LookaheadMaxNodes(s.request().speculation.lookahead));
}

std::optional<Candidates> LookaheadProposer::OnVerified(const Sequence& s, ProposerState& state,
                                                        const Candidates& verified,
                                                        const v1::VerifiedSequence& result,
                                                        int committed) const {
  auto& la = static_cast<LookaheadState&>(state);
  const std::vector<int32_t>& tokens = s.tokens();
  // The n-grams that end in a committed token of this step.
  const int from = std::max(0, static_cast<int>(tokens.size()) - committed - la.config.ngram + 1);
  la.pool.AddAll(absl::MakeConstSpan(tokens).subspan(from));
  const bool had_window = verified.method == method() && verified.acceptable >= 0 &&
                          verified.size() > verified.acceptable;
  if (metrics_ != nullptr && verified.method == method() && verified.acceptable > 0) {
    metrics_->RecordAccepted(static_cast<int>(result.num_accepted()));
  }
  // The target's argmax at every window node (level-major); the newest level's are the
  // last W.
  const int window_nodes = verified.size() - verified.acceptable;
  if (had_window && result.next_candidates().proposals_size() == window_nodes) {
    std::vector<int32_t> next;
    for (int i = window_nodes - la.window.window(); i < window_nodes; ++i) {
      next.push_back(result.next_candidates().proposals(i).token());
    }
    std::vector<std::vector<int32_t>> ngrams;
    if (la.window.Advance(next, &ngrams)) {
      for (const std::vector<int32_t>& ngram : ngrams) la.pool.Add(ngram);
    }
  }
  if (tokens.empty() || s.remaining() <= 1) return std::nullopt;
  const LookaheadStep step = BuildLookaheadStep(la.pool, la.window, tokens.back(),
                                                la.config.max_guesses, s.remaining() - 1);
  if (metrics_ != nullptr) metrics_->RecordLookup(step.acceptable > 0, la.pool.size());
  if (step.tokens.empty()) return std::nullopt;
  Candidates c;
  c.method = method();
  c.site = ProposerSite::kTargetLeader;
  for (int32_t t : step.tokens) c.tokens.push_back(PointMassProposal(t));
  c.parents = step.parents;
  c.acceptable = step.acceptable;
  return c;
}

}  // namespace tandem::coordinator
