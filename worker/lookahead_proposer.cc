#include "worker/lookahead_proposer.h"

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "spec/sampling.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {

absl::Status LookaheadTargetProposer::Propose(Backend& backend, const ForwardOutputs& outputs,
                                              const TargetProposerInput& in,
                                              v1::NextCandidates* out) const {
  if (in.sequence == nullptr) return absl::InvalidArgumentError("lookahead: no sequence");
  const int first = AcceptableProposals(*in.sequence), k = in.sequence->proposals_size();
  if (first >= k) return absl::OkStatus();
  // The whole pass's rows come over; a device argmax op would move W ints instead.
  std::vector<float> logits;
  absl::Status status = backend.CopyLogitsToHost(outputs.logits, &logits);
  if (!status.ok()) return status;
  const size_t vocab = outputs.logits.vocab;
  for (int node = first; node < k && node - first < in.max_nodes; ++node) {
    const size_t row = static_cast<size_t>(in.first_row + 1 + node);
    if ((row + 1) * vocab > logits.size()) {
      return absl::InternalError("lookahead: a window row is outside the pass's logits");
    }
    const int token = spec::Argmax(absl::MakeConstSpan(logits).subspan(row * vocab, vocab));
    v1::ProposedToken* p = out->add_proposals();
    p->set_token(token < 0 ? 0 : token);
    p->add_q_ids(p->token());
    p->add_q_probs(1.0f);
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
