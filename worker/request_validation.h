// Validation of tandem.v1.Worker step requests against the model and the worker's
// limits, with the status codes of the protocol (proto/tandem/v1/worker.proto):
// INVALID_ARGUMENT for a bad field, NOT_FOUND for an unknown sequence that is not being
// created, RESOURCE_EXHAUSTED for a batch over max_batch_tokens. A tree
// (proposal_parents) is checked as spec::ValidateTreeProposals does under the sequence's
// rule (parents in [-1, i), distinct sibling tokens, rejection's sibling q), so a bad
// tree is INVALID_ARGUMENT before anything runs. Messages name the sequence and field.
// A sequence that is not cached may only start at position 0 (it is then created);
// any other start is NOT_FOUND ("unknown sequence N: was the worker restarted?").
// (KV capacity is checked by the model when the step runs.)
#ifndef TANDEM_WORKER_REQUEST_VALIDATION_H_
#define TANDEM_WORKER_REQUEST_VALIDATION_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tandem/v1/worker.pb.h"

namespace tandem {
namespace worker {

struct RequestLimits {
  int vocab_size = 0;
  int max_batch_tokens = 0;        // Rows of one forward pass.
  int max_speculative_tokens = 0;  // Max K.
  int context_length = 0;          // Max positions per sequence.
  // Whether a target-side proposer of `method` runs here (VerifySequence.
  // next_candidates); unset = none.
  std::function<bool(v1::SpeculationMethod)> serves_target_method;
};

// Cached length of a sequence; NOT_FOUND when the worker does not hold it.
using CachedLengthFn = std::function<absl::StatusOr<int>(uint64_t)>;

// How far the probabilities of a proposal's q may sum away from 1.
inline constexpr double kProposalSumTolerance = 1e-3;

absl::Status ValidatePrefillRequest(const v1::PrefillRequest& request, const RequestLimits& limits,
                                    const CachedLengthFn& cached_length);
absl::Status ValidateDraftRequest(const v1::DraftRequest& request, const RequestLimits& limits,
                                  const CachedLengthFn& cached_length);
absl::Status ValidateVerifyRequest(const v1::VerifyRequest& request, const RequestLimits& limits,
                                   const CachedLengthFn& cached_length);
absl::Status ValidateTruncateRequest(const v1::TruncateRequest& request,
                                     const CachedLengthFn& cached_length);

// Checks one proposal: token in [0, vocab); q_ids and q_probs of equal, non-zero length;
// distinct ids in range; finite non-negative probabilities summing to 1 within
// kProposalSumTolerance; `token` in the support with positive probability.
// `where` prefixes the message.
absl::Status ValidateProposal(const v1::ProposedToken& proposal, int vocab_size,
                              const std::string& where);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_REQUEST_VALIDATION_H_
