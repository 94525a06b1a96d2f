#include "coordinator/proposers/lookahead_proposer.h"

#include <algorithm>
#include <vector>

#include "absl/types/span.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator {
namespace {

spec::LookaheadSizingConfig SizingConfig(const LookaheadConfig& config) {
  spec::LookaheadSizingConfig c;
  c.max_window = config.window;
  c.max_guesses = config.max_guesses;
  c.ngram = config.ngram;
  c.fixed_window = config.fixed_window;
  c.fixed_guesses = config.fixed_guesses;
  return c;
}

// Tokens of `guess` equal to tokens[from], tokens[from + 1], ...
int Matched(const std::vector<int32_t>& guess, const std::vector<int32_t>& tokens, int from) {
  int n = 0;
  while (n < static_cast<int>(guess.size()) && from + n < static_cast<int>(tokens.size()) &&
         guess[n] == tokens[from + n]) {
    ++n;
  }
  return n;
}

// Records the guesses of the step just verified (its key: the token before the
// `committed` new ones) and feeds the sizer every pending step whose N - 1 tokens after
// the key are committed. Call before the pool learns this step's n-grams (it then holds
// what the step was built from).
void ObserveGuesses(const std::vector<int32_t>& tokens, int committed, int live_window,
                    LookaheadState& la) {
  const int size = static_cast<int>(tokens.size()), key = size - committed - 1;
  const int follow = la.config.ngram - 1;
  if (key >= 0) {
    LookaheadState::PendingGuesses p{key, live_window, la.pool.Find(tokens[key]),
                                     la.pool.Sources(tokens[key])};
    const size_t keep = std::min<size_t>(p.guesses.size(), std::max(0, la.config.max_guesses));
    p.guesses.resize(keep);
    p.sources.resize(keep);
    la.pending.push_back(std::move(p));
  }
  while (!la.pending.empty() && (la.pending.front().key_index + follow < size ||
                                 static_cast<int>(la.pending.size()) > follow + 1)) {
    const LookaheadState::PendingGuesses& p = la.pending.front();
    std::vector<spec::GuessOutcome> outcomes;
    for (size_t i = 0; i < p.guesses.size(); ++i) {
      outcomes.push_back({p.sources[i], Matched(p.guesses[i], tokens, p.key_index + 1)});
    }
    la.sizer.Observe(outcomes, p.live_window);
    la.pending.pop_front();
  }
}

}  // namespace

LookaheadState::LookaheadState(const LookaheadConfig& config, const std::vector<int32_t>& prompt)
    : config(config),
      pool(config.ngram, config.max_guesses),
      window(config.window, config.ngram - 1, prompt),
      sizer(SizingConfig(config)) {
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
  const bool had_window = verified.method == method() && verified.acceptable >= 0 &&
                          verified.size() > verified.acceptable;
  ObserveGuesses(tokens, committed, had_window ? la.window.window() : 0, la);
  // The n-grams that end in a committed token of this step.
  const int from = std::max(0, static_cast<int>(tokens.size()) - committed - la.config.ngram + 1);
  la.pool.AddAll(absl::MakeConstSpan(tokens).subspan(from));
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
      for (size_t column = 0; column < ngrams.size(); ++column) {
        la.pool.Add(ngrams[column], static_cast<int>(column));
      }
    }
  }
  std::optional<Candidates> next = NextStep(s, la);
  if (metrics_ != nullptr && s.remaining() > 1) {
    metrics_->RecordLookup(next.has_value() && next->acceptable > 0, la.pool.size());
  }
  return next;
}

std::optional<Candidates> LookaheadProposer::NextStep(const Sequence& s, LookaheadState& la) const {
  const std::vector<int32_t>& tokens = s.tokens();
  const spec::LookaheadShape shape = la.sizer.incumbent();
  if (tokens.empty() || s.remaining() <= 1 || (shape.window == 0 && shape.guesses == 0)) {
    return std::nullopt;
  }
  if (shape.window > 0 && shape.window != la.window.window()) la.window.Resize(shape.window);
  const LookaheadStep step = BuildLookaheadStep(la.pool, la.window, tokens.back(), shape.guesses,
                                                s.remaining() - 1, shape.window > 0);
  if (step.tokens.empty()) return std::nullopt;
  Candidates c;
  c.method = method();
  c.site = ProposerSite::kTargetLeader;
  for (int32_t t : step.tokens) c.tokens.push_back(PointMassProposal(t));
  c.parents = step.parents;
  c.acceptable = step.acceptable;
  c.TruncateDepth(std::max(0, s.remaining() - 1));
  return c;
}

void LookaheadProposer::FitCandidates(Sequence* s, ProposerState& state,
                                      const spec::VerifyCostFn& verify_cost) const {
  if (!s->candidates.empty() && s->candidates.method != method()) return;
  auto& la = static_cast<LookaheadState&>(state);
  const spec::LookaheadShape before = la.sizer.incumbent();
  const spec::LookaheadShape shape = la.sizer.Choose(verify_cost).shape;
  if (metrics_ != nullptr) metrics_->RecordShape(shape.window, shape.guesses);
  if (!s->candidates.empty() && shape == before) return;
  std::optional<Candidates> next = NextStep(*s, la);
  s->candidates = next.has_value() ? *std::move(next) : Candidates();
}

}  // namespace tandem::coordinator
