// Draft role: proposes K tokens per sequence with the draft model.
//
// Per sequence of a DraftRequest (a ragged batch): start_position truncates the cache
// (rollback of the previous step's rejected proposals), the uncached committed tokens
// are fed, and the logits of the last one give the first proposal distribution. Each
// distribution is processed with the sequence's sampling (temperature, top-k, top-p;
// spec::ProcessLogits) and turned into the sparse proposal q = TopKSparse(p, k)
// (greedy: PointMass(argmax)); d_i is drawn from q with
// UniformDouble(seed, kDraftSample, position of d_i) -- an absolute cache position, so
// the draws never depend on batching. Sequences whose rule is ACCEPTANCE_RULE_COUPLED
// propose the Gumbel-max token instead, spec::GumbelSample(p, seed, position of d_i),
// with q = PointMass(d_i) (spec/acceptance.h, the coupled rule). The sampling runs where the logits
// are (DraftSampleConsumer, kernels/accept/draft_sample.h): only each token and its
// q come back. d_1 .. d_{K-1} are then fed one per forward pass (each pass batching every sequence
// that still needs tokens), so K forward passes in all; d_K is not fed, and the cache ends at
// start_position + tokens + K - 1.
//
// Branches: an entry with fork_from set is first forked from that sequence at its
// start_position (ModelExecutor::Fork: it shares the parent's KV blocks, replacing an
// existing sequence of its id), then drafted like any other. Draws are keyed by
// absolute position and the forward pass is batch invariant, so a branch proposes
// exactly the tokens and q a fresh Draft of the same prefix would (what keeps a
// pre-drafted outcome as valid as a fresh draft, docs/architecture.md §3).
//
// Trees (DraftSequence.tree_nodes > 0, greedy or coupled): the first pass is shared
// with chains; then each pass feeds every frontier node (draft_tree.h) as one row on its
// own branch, forked (ModelExecutor::Fork, sharing KV) from its parent's branch or, at
// depth 1, from the sequence, and asks each row for its tree_width top tokens
// (DraftRow::top); under the coupled rule the row's own coupled sample is the first
// child (draft_tree.h, CoupledChildren), so the tree's spine is the chain's path. Branch ids are
// worker-internal (bit 63 set) and released before the call returns, so the sequence's cache holds
// start_position + tokens (cached_length says so). The proposals are the tree's nodes, point
// masses, with proposal_parents and path_probs.
//
// Requests are expected to be valid (see request_validation.h; q sizes must be in
// [1, kMaxDraftQSize]); the engine still never crashes on bad input (the model rejects
// it). Not thread-safe.
#ifndef TANDEM_WORKER_DRAFT_ENGINE_H_
#define TANDEM_WORKER_DRAFT_ENGINE_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/accept/draft_sample.h"
#include "tandem/v1/worker.pb.h"
#include "worker/model_executor.h"

namespace tandem {
namespace worker {

struct DraftEngineOptions {
  int default_proposal_top_k = 32;  // Used when a sequence's proposal_top_k is 0.
};

class DraftEngine {
 public:
  // `executor` is borrowed and must outlive the engine.
  DraftEngine(ModelExecutor* executor, const DraftEngineOptions& options);

  // Drafts every sequence of `request`. RESOURCE_EXHAUSTED (before any change) when
  // the KV cache cannot hold all drafted positions; INTERNAL ("draft: sequence <id> has
  // no finite logits at position <p>") when a distribution has nothing to sample; the
  // model's error otherwise (NOT_FOUND for an unknown fork_from). On an error after the
  // forks or the first forward pass, the branches made and the sequences keep what was
  // fed (the next step's start_position rolls them back; Release drops branches).
  absl::StatusOr<v1::DraftResponse> Draft(const v1::DraftRequest& request);

 private:
  struct Pass;
  struct DraftState;

  absl::Status CheckCapacity(const v1::DraftRequest& request) const;
  static absl::Status NoLogitsError(const v1::DraftSequence& seq, uint64_t position);
  // Records chain sequence s's proposal of pass i and adds its next input to `next`.
  static absl::Status ExtendChain(const v1::DraftSequence& seq, int s, int i,
                                  const DraftProposal& proposal, DraftState* state, Pass* next);
  // The forward passes of a checked request (forks made).
  absl::StatusOr<v1::DraftResponse> RunPasses(const v1::DraftRequest& request);
  // Grows tree sequence s from its frontier's rows, forks the new frontier's branches
  // and adds their rows to `next`.
  absl::Status GrowTree(const v1::DraftSequence& seq, int s, absl::Span<const DraftProposal> rows,
                        DraftState* state, Pass* next);
  // Releases the request's tree branches that exist.
  void ReleaseTreeBranches(const v1::DraftRequest& request);
  // Writes the trees into the response and completes it.
  absl::StatusOr<v1::DraftResponse> Finish(const v1::DraftRequest& request, DraftState state,
                                           double forward_ms_before);
  // Forks every branch entry of `request` from its parent, in request order.
  absl::Status ForkBranches(const v1::DraftRequest& request);

  ModelExecutor* executor_;
  DraftEngineOptions options_;
};

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_DRAFT_ENGINE_H_
