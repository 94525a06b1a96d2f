#include "coordinator/proposers/registry.h"

#include "coordinator/proposers/draft_proposer.h"
#include "coordinator/proposers/lookahead_proposer.h"
#include "coordinator/proposers/prompt_lookup_proposer.h"

namespace tandem::coordinator {

ProposerRegistry::ProposerRegistry(const ProposerConfig& config) {
  if (config.draft_worker) proposers_.push_back(std::make_unique<DraftProposer>());
  proposers_.push_back(std::make_unique<PromptLookupProposer>(config.prompt_lookup_branches));
  for (const auto& p : config.extra) proposers_.push_back(p);
  // Served, but only when named: it does not pay on the CPU backend (bench/README.md).
  proposers_.push_back(std::make_unique<LookaheadProposer>(
      config.metrics ? std::make_shared<LookaheadMetrics>(config.metrics) : nullptr));
  auto_size_ = proposers_.size() - 1;
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
  for (size_t i = 0; i < proposers_.size(); ++i) {
    const bool in_auto = method == v1::SPECULATION_METHOD_AUTO && i < auto_size_;
    if (in_auto || proposers_[i]->method() == method) chain.push_back(proposers_[i].get());
  }
  return chain;
}

}  // namespace tandem::coordinator
