#include "coordinator/proposers/registry.h"

#include <algorithm>

#include "coordinator/proposers/draft_proposer.h"
#include "coordinator/proposers/lookahead_proposer.h"
#include "coordinator/proposers/medusa_proposer.h"
#include "coordinator/proposers/prompt_lookup_proposer.h"

namespace tandem::coordinator {
namespace {

// Target-leader proposers are not in AUTO's chain: the leader returns their candidates
// with every verify of a sequence whose chain holds one, so they would pre-empt the
// speculation controller's choice among the other entries (docs/architecture.md §5,
// Medusa: the measurement behind leaving it out).
bool InAuto(const Proposer& p) { return p.capabilities().site != ProposerSite::kTargetLeader; }

}  // namespace

ProposerRegistry::ProposerRegistry(const ProposerConfig& config) {
  if (config.draft_worker) proposers_.push_back(std::make_unique<DraftProposer>());
  const std::vector<v1::SpeculationMethod>& leader = config.target_methods;
  if (std::find(leader.begin(), leader.end(), v1::SPECULATION_METHOD_MEDUSA) != leader.end()) {
    proposers_.push_back(std::make_unique<MedusaProposer>(config.medusa_nodes));
  }
  proposers_.push_back(std::make_unique<PromptLookupProposer>(config.prompt_lookup_branches));
  for (const auto& p : config.extra) proposers_.push_back(p);
  // Served, but only when named (a target-leader method): it does not pay on the CPU
  // backend (bench/README.md).
  proposers_.push_back(std::make_unique<LookaheadProposer>(
      config.metrics ? std::make_shared<LookaheadMetrics>(config.metrics) : nullptr));
}

std::vector<v1::SpeculationMethod> ProposerRegistry::served_methods() const {
  std::vector<v1::SpeculationMethod> methods;
  for (const auto& p : proposers_) methods.push_back(p->method());
  return methods;
}

std::vector<v1::SpeculationMethod> ProposerRegistry::listed_methods() const {
  std::vector<v1::SpeculationMethod> methods = {v1::SPECULATION_METHOD_AUTO,
                                                v1::SPECULATION_METHOD_NONE};
  for (v1::SpeculationMethod m : served_methods()) methods.push_back(m);
  return methods;
}

std::vector<const Proposer*> ProposerRegistry::ChainFor(v1::SpeculationMethod method) const {
  std::vector<const Proposer*> chain;
  for (const auto& p : proposers_) {
    if (p->method() == method || (method == v1::SPECULATION_METHOD_AUTO && InAuto(*p))) {
      chain.push_back(p.get());
    }
  }
  return chain;
}

}  // namespace tandem::coordinator
