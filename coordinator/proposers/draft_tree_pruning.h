// Dynamic draft trees priced per node on the coordinator: the draft worker returns its
// best nodes ranked by path probability (DraftedSequence.proposal_parents, path_probs;
// worker/draft_tree.h); a node's path probability is the draft's probability that the
// target accepts its whole path, so it is the node's expected value in tokens. The
// draft's chain is kept (from the root, each node's first, likeliest child, down to
// depth `base_nodes`: the K the controller priced), so a tree never commits less than
// that chain; each other node only when its path probability exceeds `min_value`
// (spec::NodeValueThreshold: the tokens one more verify row must bring) and its parent
// is kept, so the result stays a tree (docs/architecture.md §5, Dynamic draft trees).
#ifndef TANDEM_COORDINATOR_PROPOSERS_DRAFT_TREE_PRUNING_H_
#define TANDEM_COORDINATOR_PROPOSERS_DRAFT_TREE_PRUNING_H_

#include "coordinator/proposers/candidates.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::coordinator {

// Replaces c's tokens and parents with the kept nodes of `drafted` (in its order,
// parents renumbered). Never a malformed tree: a node whose parent is not before it
// ends the tree there, and a response whose proposal_parents or path_probs sizes do
// not match its proposals yields no nodes.
void PruneDraftTree(const v1::DraftedSequence& drafted, int base_nodes, double min_value,
                    Candidates* c);

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_PROPOSERS_DRAFT_TREE_PRUNING_H_
