// The proposers a coordinator serves, built once from its configuration: the single
// source of the methods it accepts (ServerLimits.available_methods), what
// ModelInfo.methods lists, and each method's chain (AUTO: every served proposer in
// preference order except target-leader ones (Medusa, Lookahead), the speculation
// controller picks among the usable ones; a named method: that proposer; NONE: none).
#ifndef TANDEM_COORDINATOR_PROPOSERS_REGISTRY_H_
#define TANDEM_COORDINATOR_PROPOSERS_REGISTRY_H_

#include <memory>
#include <vector>

#include "coordinator/proposers/medusa_proposer.h"
#include "coordinator/proposers/proposer.h"
#include "prometheus/registry.h"

namespace tandem::coordinator {

struct ProposerConfig {
  bool draft_worker = false;  // A draft worker is configured: the draft model is served.
  // Served after the built-in proposers, in order (tests: a testonly method).
  std::vector<std::shared_ptr<const Proposer>> extra;
  // Prompt lookup's distinct continuations per proposal (PromptLookupProposer): 1 =
  // chains (the default), 2..PromptLookupOptions::kMaxBranches = token trees.
  int prompt_lookup_branches = 1;
  // Where proposers register their own series (CoordinatorMetrics::registry()); null =
  // none.
  std::shared_ptr<prometheus::Registry> metrics;
  // Methods the target leader serves (DescribeResponse.target_methods): MEDUSA there
  // serves the Medusa proposer.
  std::vector<v1::SpeculationMethod> target_methods;
  // Medusa's tree size for requests without a fixed size (MedusaProposer), >= 1.
  int medusa_nodes = kDefaultMedusaNodes;
};

class ProposerRegistry {
 public:
  // Served proposers, in preference order: the draft model (when configured), Medusa
  // heads (when the target leader serves them), prompt lookup, `extra`, Lookahead. AUTO
  // leaves the target-leader ones out.
  explicit ProposerRegistry(const ProposerConfig& config);

  // Methods a request may name besides AUTO and NONE.
  std::vector<v1::SpeculationMethod> served_methods() const;
  // What ModelInfo.methods lists: AUTO, NONE, then the served methods.
  std::vector<v1::SpeculationMethod> listed_methods() const;
  // The chain of `method` (empty for NONE or a method that is not served; AUTO leaves
  // target-leader proposers out).
  std::vector<const Proposer*> ChainFor(v1::SpeculationMethod method) const;

 private:
  std::vector<std::shared_ptr<const Proposer>> proposers_;  // Preference order.
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_REGISTRY_H_
