#include "coordinator/proposers/outcome_ranking.h"

#include <algorithm>

namespace tandem::coordinator {
namespace {

// The probability of `token` in ids/probs (0 when absent).
template <typename Ids, typename Probs>
double ProbabilityOf(int32_t token, const Ids& ids, const Probs& probs) {
  for (int i = 0; i < ids.size() && i < probs.size(); ++i) {
    if (ids[i] == token) return probs[i];
  }
  return 0;
}

// a_i: the draft's probability of proposal i at its position.
double Confidence(const std::vector<v1::ProposedToken>& proposals,
                  const std::vector<v1::TopTokens>& top, size_t i) {
  const v1::ProposedToken& p = proposals[i];
  if (i < top.size() && top[i].ids_size() > 0) {
    return ProbabilityOf(p.token(), top[i].ids(), top[i].probs());
  }
  return ProbabilityOf(p.token(), p.q_ids(), p.q_probs());
}

}  // namespace

std::vector<StepOutcome> RankOutcomes(const std::vector<v1::ProposedToken>& proposals,
                                      const std::vector<v1::TopTokens>& top, int max_outcomes) {
  std::vector<StepOutcome> outcomes;
  if (proposals.empty() || max_outcomes <= 0) return outcomes;
  double prefix = 1, confidence_sum = 0;
  for (size_t j = 0; j < proposals.size(); ++j) {
    // Rejected at proposal j (0-based): j accepted, then one of position j's other tokens.
    if (j < top.size()) {
      for (int e = 0; e < top[j].ids_size() && e < top[j].probs_size(); ++e) {
        if (top[j].ids(e) == proposals[j].token() || !(top[j].probs(e) > 0)) continue;
        outcomes.push_back({static_cast<int>(j), top[j].ids(e), prefix * top[j].probs(e)});
      }
    }
    const double a = Confidence(proposals, top, j);
    confidence_sum += a;
    prefix *= a;
  }
  outcomes.push_back({static_cast<int>(proposals.size()), -1,
                      prefix * confidence_sum / static_cast<double>(proposals.size())});
  std::stable_sort(outcomes.begin(), outcomes.end(),
                   [](const StepOutcome& a, const StepOutcome& b) {
                     if (a.probability != b.probability) return a.probability > b.probability;
                     if (a.accepted != b.accepted) return a.accepted < b.accepted;
                     return a.token < b.token;
                   });
  if (static_cast<int>(outcomes.size()) > max_outcomes) outcomes.resize(max_outcomes);
  return outcomes;
}

}  // namespace tandem::coordinator
