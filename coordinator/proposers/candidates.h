// The candidates of one speculative step for one sequence: what a proposer hands to the
// target for verification. A chain (parents empty: node i follows node i - 1, node 0
// follows the last committed token) or a tree (parents[i] = index of node i's parent,
// -1 = a child of the last committed token; parents[i] < i). Position ids are implicit
// (start + depth) unless `positions` is set (one per node, for methods whose nodes are
// not at their depth, e.g. Lookahead). Each node carries the sparse distribution q its
// token was drawn from (a point mass for deterministic proposers).
#ifndef TANDEM_COORDINATOR_PROPOSERS_CANDIDATES_H_
#define TANDEM_COORDINATOR_PROPOSERS_CANDIDATES_H_

#include <cstdint>
#include <vector>

#include "tandem/v1/tandem.pb.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

// Where a proposer runs: decides which worker a step's proposing costs time on.
enum class ProposerSite { kCoordinator, kDraftWorker, kTargetLeader };

struct Candidates {
  v1::SpeculationMethod method = v1::SPECULATION_METHOD_NONE;  // Who proposed them.
  ProposerSite site = ProposerSite::kCoordinator;
  std::vector<v1::ProposedToken> tokens;  // One per node.
  std::vector<int32_t> parents;           // Empty = chain.
  std::vector<int32_t> positions;         // Empty = start + depth.
  // Drafted while the step before was verified (a speculation-cache hit), not on the
  // critical path.
  bool predrafted = false;
  // The tree option of a proposer that offers a chain or a tree (OffersTreeChoice):
  // its steps are that option's evidence, apart from the proposer's chains.
  bool tree_option = false;
  // -1 = every node may be accepted. Else nodes [0, acceptable) may be (their parents
  // lie among them) and the rest are computed only (Lookahead's window: rows the
  // target-leader half reads, never accepted; VerifySequence.num_acceptable).
  int acceptable = -1;

  bool empty() const { return tokens.empty(); }
  // Nodes: the rows a verify spends on them.
  int size() const { return static_cast<int>(tokens.size()); }
  // The longest root path among the acceptable nodes: the most proposals one step can
  // accept (a chain's size). What acceptance bookkeeping counts as proposed (stats,
  // the controller, metrics).
  int depth() const;
  void Clear() { *this = Candidates(); }
  // Keeps the nodes at depth <= n (a chain's first n; parents and positions follow,
  // indices renumbered in order); computed-only nodes go first (all of them).
  // No-op when no node is deeper than n.
  void TruncateDepth(int n);
};

// A proposal of `token` with probability 1 (deterministic proposers).
v1::ProposedToken PointMassProposal(int32_t token);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_CANDIDATES_H_
