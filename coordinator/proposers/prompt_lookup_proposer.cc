#include "coordinator/proposers/prompt_lookup_proposer.h"

#include "coordinator/prompt_lookup.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator {
namespace {

struct LookupState : ProposerState {
  PromptLookup index;
};

}  // namespace

std::unique_ptr<ProposerState> PromptLookupProposer::NewState(const Sequence& s) const {
  auto state = std::make_unique<LookupState>();
  state->index.Append(s.tokens());
  return state;
}

Candidates PromptLookupProposer::Propose(const Sequence& s, ProposerState& state, int k) const {
  Candidates c;
  c.method = method();
  c.site = ProposerSite::kCoordinator;
  for (int32_t t : static_cast<LookupState&>(state).index.Propose(k)) {
    c.tokens.push_back(PointMassProposal(t));
  }
  return c;
}

std::optional<Candidates> PromptLookupProposer::OnVerified(const Sequence& s, ProposerState& state,
                                                           const Candidates& verified,
                                                           const v1::VerifiedSequence& result,
                                                           int committed) const {
  const std::vector<int32_t>& tokens = s.tokens();
  static_cast<LookupState&>(state).index.Append(
      std::vector<int32_t>(tokens.end() - committed, tokens.end()));
  return std::nullopt;
}

}  // namespace tandem::coordinator
