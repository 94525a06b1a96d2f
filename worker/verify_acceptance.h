// Acceptance of a verify step (worker/target_engine.h): one forward pass over the
// request's sequences (VerifyBatch), then the sequence's acceptance rule on the K + 1
// logit rows of each chain or tree, on the backend where the logits are
// (VerifyOnBackend: Backend::VerifyAccept, kernels/accept/verify_accept.h, exactly
// spec::AcceptProposals for a chain and spec::AcceptTree for a tree; only the committed
// tokens, the accepted path and their log-probabilities leave a GPU). Every rule runs
// on the backend for chains and trees, so there is no host acceptance path.
#ifndef TANDEM_WORKER_VERIFY_ACCEPTANCE_H_
#define TANDEM_WORKER_VERIFY_ACCEPTANCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/forward_consumer.h"
#include "model/llama.h"
#include "tandem/v1/worker.pb.h"
#include "worker/model_executor.h"

namespace tandem {
namespace worker {

// The forward pass of `request`: per sequence its uncached committed tokens then its
// proposals (a tree's as children of the last committed token), with logits for the
// last committed token and every proposal, computed-only ones included: K + 1 rows,
// sequence after sequence.
std::vector<SequenceInput> VerifyBatch(const v1::VerifyRequest& request);

// What the acceptance decided for one sequence.
struct Verdict {
  std::vector<int32_t> committed;  // Accepted proposals, then the correction or bonus.
  std::vector<int> accepted;       // Accepted proposal indices, a root-to-node path.
  std::vector<float> logprobs;     // spec::CommittedLogProb of each committed token when
                                   // the sequence's sampling asks for them, else empty.
};

// Verdicts in sequence order up to the first sequence whose acceptance fails (its
// rule parameters are invalid, or a distribution to sample from is empty), whose error
// is then the last entry.
using Verdicts = std::vector<absl::StatusOr<Verdict>>;

// Work that needs both a verify pass's outputs and its verdicts (the target-side
// proposers, worker/target_proposer.h): runs inside the verify forward, once the
// verdicts are known.
class VerdictConsumer {
 public:
  virtual ~VerdictConsumer() = default;
  // Whether Consume reads ForwardOutputs::hidden_rows.
  virtual bool wants_hidden_rows() const = 0;
  // `outputs` are the pass's (in `backend`'s memory, valid during the call); `verdicts`
  // as VerifyOnBackend fills them. An error fails the forward (its batch
  // is rolled back).
  virtual absl::Status Consume(Backend& backend, const ForwardOutputs& outputs,
                               const Verdicts& verdicts) = 0;
};

// Runs VerifyBatch(request) (`batch`) through executor->Forward with a
// VerifyAcceptConsumer of one VerifyChain per sequence (a tree's with its
// proposal_parents) and fills *verdicts (appended to), then hands the outputs and
// verdicts to `after` when it is not null. Returns the forward's error, if any.
absl::Status VerifyOnBackend(ModelExecutor* executor, const v1::VerifyRequest& request,
                             const std::vector<SequenceInput>& batch, Verdicts* verdicts,
                             VerdictConsumer* after = nullptr);

}  // namespace worker
}  // namespace tandem

#endif  // TANDEM_WORKER_VERIFY_ACCEPTANCE_H_
