#include "coordinator/proposers/prompt_lookup_proposer.h"

#include <algorithm>
#include <utility>

#include "coordinator/prompt_lookup.h"
#include "coordinator/sequence.h"

namespace tandem::coordinator {
namespace {

struct LookupState : ProposerState {
  explicit LookupState(PromptLookup index) : index(std::move(index)) {}
  PromptLookup index;
};

}  // namespace

PromptLookupProposer::PromptLookupProposer(int max_branches) {
  options_.max_branches = std::clamp(max_branches, 1, PromptLookupOptions::kMaxBranches);
}

std::unique_ptr<ProposerState> PromptLookupProposer::NewState(const Sequence& s) const {
  auto state = std::make_unique<LookupState>(*PromptLookup::Create(options_));
  state->index.Append(s.tokens());
  return state;
}

Candidates PromptLookupProposer::Propose(const Sequence& s, ProposerState& state, int k,
                                         int max_nodes) const {
  Candidates c;
  c.method = method();
  c.site = ProposerSite::kCoordinator;
  const PromptLookup& index = static_cast<LookupState&>(state).index;
  PromptLookupTree tree;
  if (options_.max_branches == 1) {
    tree.tokens = index.Propose(k);
  } else {
    tree = index.ProposeTree(k, std::min(k * options_.max_branches, max_nodes));
    if (!tree.IsChain()) c.parents = std::move(tree.parents);
  }
  for (int32_t t : tree.tokens) c.tokens.push_back(PointMassProposal(t));
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
