#include "worker/lookahead_proposer.h"

#include <cstdint>

#include "absl/types/span.h"
#include "spec/sampling.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {

std::vector<int> LookaheadLeaves(const v1::VerifySequence& seq) {
  const int k = seq.proposals_size(), first = AcceptableProposals(seq);
  std::vector<bool> has_child(k, false);
  for (int i = first + 1; i < k; ++i) {
    const int parent = seq.proposal_parents_size() == k ? seq.proposal_parents(i) : i - 1;
    if (parent >= first) has_child[parent] = true;
  }
  std::vector<int> leaves;
  for (int i = first; i < k; ++i) {
    if (!has_child[i]) leaves.push_back(i);
  }
  return leaves;
}

absl::Status LookaheadTargetProposer::Propose(Backend& backend, const ForwardOutputs& outputs,
                                              const TargetProposerInput& in,
                                              v1::NextCandidates* out) const {
  if (in.sequence == nullptr) return absl::InvalidArgumentError("lookahead: no sequence");
  const std::vector<int> leaves = LookaheadLeaves(*in.sequence);
  if (leaves.empty()) return absl::OkStatus();
  // The whole pass's rows come over; a device argmax op would move W ints instead.
  std::vector<float> logits;
  absl::Status status = backend.CopyLogitsToHost(outputs.logits, &logits);
  if (!status.ok()) return status;
  const size_t vocab = outputs.logits.vocab;
  for (int i = 0; i < static_cast<int>(leaves.size()) && i < in.max_nodes; ++i) {
    const size_t row = static_cast<size_t>(in.first_row + 1 + leaves[i]);
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
