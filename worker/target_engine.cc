#include "worker/target_engine.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {
namespace {

// Outcome of acceptance for one sequence: committed tokens, the logit row (within the
// sequence's K + 1 rows) each was drawn from, and the accepted proposal indices.
struct Accepted {
  std::vector<int32_t> committed;
  std::vector<int> rows;
  std::vector<int> accepted;
};

// Greedy walk of a candidate tree: from the root (row 0), follow the child whose token
// is the argmax of the current row; stop at the first row whose argmax no child has
// (a correction, or a bonus at a leaf).
Accepted WalkTreeGreedy(const v1::VerifySequence& seq, const std::vector<float>& logits,
                        int vocab) {
  Accepted out;
  int node = -1;  // -1 = the last committed token (row 0); j = proposal j (row j + 1).
  while (true) {
    const int row = node + 1;
    const int32_t best =
        spec::Argmax(absl::MakeConstSpan(logits.data() + size_t(row) * vocab, vocab));
    out.committed.push_back(best);
    out.rows.push_back(row);
    int next = -1;
    for (int j = node + 1; j < seq.proposals_size(); ++j) {
      if (seq.proposal_parents(j) == node && seq.proposals(j).token() == best) {
        next = j;
        break;
      }
    }
    if (next < 0) return out;
    out.accepted.push_back(next);
    node = next;
  }
}

absl::StatusOr<Accepted> AcceptChain(const v1::VerifySequence& seq,
                                     const std::vector<std::vector<float>>& probs) {
  absl::StatusOr<spec::AcceptanceParams> params = ToAcceptanceParams(seq.sampling());
  if (!params.ok()) return params.status();
  std::vector<spec::Proposal> proposals(seq.proposals_size());
  for (int i = 0; i < seq.proposals_size(); ++i) {
    const v1::ProposedToken& p = seq.proposals(i);
    proposals[i].token = p.token();
    proposals[i].q.ids.assign(p.q_ids().begin(), p.q_ids().end());
    proposals[i].q.probs.assign(p.q_probs().begin(), p.q_probs().end());
  }
  std::vector<absl::Span<const float>> spans(probs.begin(), probs.end());
  absl::StatusOr<spec::AcceptanceResult> result = spec::AcceptProposals(
      proposals, spans, *params, spec::RandomKey{seq.sampling().seed(), seq.sample_index()});
  if (!result.ok()) return result.status();
  Accepted out;
  out.committed = std::move(result->committed);
  for (int i = 0; i < static_cast<int>(out.committed.size()); ++i) out.rows.push_back(i);
  for (int i = 0; i < result->num_accepted; ++i) out.accepted.push_back(i);
  return out;
}

}  // namespace

TargetEngine::TargetEngine(ModelExecutor* executor) : executor_(executor) {}

absl::StatusOr<v1::VerifyResponse> TargetEngine::Verify(const v1::VerifyRequest& request) {
  const int vocab = executor_->config().vocab_size;
  const ExecutorTimes before = executor_->times();
  std::vector<SequenceInput> batch;
  batch.reserve(request.sequences_size());
  for (const v1::VerifySequence& seq : request.sequences()) {
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(seq.start_position());
    in.tokens.assign(seq.tokens().begin(), seq.tokens().end());
    const int n = static_cast<int>(in.tokens.size());
    const int k = seq.proposals_size();
    for (const v1::ProposedToken& p : seq.proposals()) in.tokens.push_back(p.token());
    for (int i = 0; i <= k; ++i) in.logit_indices.push_back(n - 1 + i);
    if (seq.proposal_parents_size() > 0) {
      for (int i = 0; i < n; ++i) in.parents.push_back(i - 1);
      for (int32_t p : seq.proposal_parents()) in.parents.push_back(p < 0 ? n - 1 : n + p);
    }
    batch.push_back(std::move(in));
  }
  std::vector<float> logits;
  absl::Status status = executor_->Forward(batch, &logits);
  if (!status.ok()) return status;

  v1::VerifyResponse response;
  size_t row_offset = 0;  // First logit row of the current sequence.
  std::vector<std::vector<float>> probs;
  std::vector<float> seq_logits;
  for (int s = 0; s < request.sequences_size() && status.ok(); ++s) {
    const v1::VerifySequence& seq = request.sequences(s);
    const int n = seq.tokens_size(), k = seq.proposals_size();
    seq_logits.assign(logits.begin() + row_offset * vocab,
                      logits.begin() + (row_offset + k + 1) * vocab);
    row_offset += k + 1;
    const bool greedy = IsGreedy(seq.sampling());
    const bool tree = seq.proposal_parents_size() > 0;
    probs.resize(k + 1);
    if (!tree || seq.sampling().return_logprobs()) {
      for (int i = 0; i <= k; ++i) {
        spec::ProcessLogits(absl::MakeConstSpan(seq_logits.data() + size_t(i) * vocab, vocab),
                            ToSamplingConfig(seq.sampling()), &probs[i]);
      }
    }
    absl::StatusOr<Accepted> accepted;
    if (tree) {
      accepted = WalkTreeGreedy(seq, seq_logits, vocab);
    } else {
      accepted = AcceptChain(seq, probs);
    }
    if (!accepted.ok()) {
      status = absl::Status(accepted.status().code(),
                            absl::StrCat("verify: sequence ", seq.sequence_id(), ": ",
                                         accepted.status().message()));
      break;
    }
    const int num_accepted = static_cast<int>(accepted->accepted.size());
    if (tree) {
      std::vector<int32_t> keep;
      for (int i = 0; i < n; ++i) keep.push_back(i);
      for (int j : accepted->accepted) keep.push_back(n + j);
      status = executor_->KeepPath(seq.sequence_id(), static_cast<int>(seq.start_position()),
                                   keep);
    } else {
      status = executor_->Truncate(seq.sequence_id(),
                                   static_cast<int>(seq.start_position()) + n + num_accepted);
    }
    if (!status.ok()) break;
    v1::VerifiedSequence* out = response.add_sequences();
    out->set_sequence_id(seq.sequence_id());
    out->mutable_committed()->Assign(accepted->committed.begin(), accepted->committed.end());
    out->set_num_accepted(num_accepted);
    out->set_cached_length(seq.start_position() + n + num_accepted);
    if (seq.sampling().return_logprobs()) {
      for (size_t j = 0; j < accepted->committed.size(); ++j) {
        const int row = accepted->rows[j];
        out->add_logprobs(static_cast<float>(CommittedLogProb(
            absl::MakeConstSpan(seq_logits.data() + size_t(row) * vocab, vocab), probs[row],
            accepted->committed[j], greedy)));
      }
    }
  }
  if (!status.ok()) {
    // Leave no half-verified sequence behind: back to the state before the call.
    for (const SequenceInput& in : batch) (void)executor_->Truncate(in.seq_id, in.start_position);
    return status;
  }
  const ExecutorTimes after = executor_->times();
  const double collective = after.collective_ms - before.collective_ms;
  response.set_collective_ms(static_cast<float>(collective));
  response.set_compute_ms(
      static_cast<float>(after.forward_ms - before.forward_ms - collective));
  return response;
}

absl::StatusOr<v1::PrefillResponse> RunPrefill(ModelExecutor* executor,
                                               const v1::PrefillRequest& request) {
  std::vector<SequenceInput> batch;
  batch.reserve(request.sequences_size());
  for (const v1::PrefillSequence& seq : request.sequences()) {
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(seq.start_position());
    in.tokens.assign(seq.tokens().begin(), seq.tokens().end());
    batch.push_back(std::move(in));
  }
  std::vector<float> logits;
  absl::Status status = executor->Forward(batch, &logits);
  if (!status.ok()) return status;
  v1::PrefillResponse response;
  for (const SequenceInput& in : batch) {
    response.add_cached_lengths(static_cast<uint32_t>(in.start_position + in.tokens.size()));
  }
  return response;
}

}  // namespace worker
}  // namespace tandem
