#include "worker/verify_acceptance.h"

#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "kernels/accept/verify_accept.h"
#include "model/output_consumers.h"
#include "spec/acceptance.h"
#include "spec/sampling.h"
#include "spec/tree_acceptance.h"
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

// The random key of a sequence: its first proposal (row 1) sits at absolute position
// start_position + tokens_size (the last committed token is at the one before).
spec::RandomKey KeyOf(const v1::VerifySequence& seq) {
  return spec::RandomKey{seq.sampling().seed(), seq.sample_index(),
                         uint64_t{seq.start_position()} + uint64_t(seq.tokens_size())};
}

// The rule over the sequence's proposals with their K + 1 processed target rows: a chain
// (spec::AcceptProposals) or a tree (spec::AcceptTree). Committed token j is drawn from
// row 0 (j = 0) or from the row after the accepted node before it.
absl::StatusOr<Accepted> Accept(const v1::VerifySequence& seq,
                                const std::vector<std::vector<float>>& probs) {
  absl::StatusOr<spec::AcceptanceParams> params = ToAcceptanceParams(seq.sampling());
  if (!params.ok()) return params.status();
  std::vector<spec::Proposal> proposals;
  for (const v1::ProposedToken& p : seq.proposals()) proposals.push_back(ToProposal(p));
  const std::vector<absl::Span<const float>> spans(probs.begin(), probs.end());
  Accepted out;
  if (seq.proposal_parents_size() == 0) {
    absl::StatusOr<spec::AcceptanceResult> result =
        spec::AcceptProposals(proposals, spans, *params, KeyOf(seq));
    if (!result.ok()) return result.status();
    out.committed = std::move(result->committed);
    for (int j = 0; j < result->num_accepted; ++j) out.accepted.push_back(j);
  } else {
    const std::vector<int32_t> parents(seq.proposal_parents().begin(),
                                       seq.proposal_parents().end());
    absl::StatusOr<spec::TreeAcceptanceResult> result =
        spec::AcceptTree(parents, proposals, spans, *params, KeyOf(seq));
    if (!result.ok()) return result.status();
    out.committed = std::move(result->committed);
    out.accepted = std::move(result->path);
  }
  out.rows.push_back(0);
  for (int node : out.accepted) out.rows.push_back(node + 1);
  return out;
}

// The acceptance of every sequence of `request` over its K + 1 rows of the host
// `logits` (row-major [rows, vocab]); appends the verdicts up to the first failure.
void AcceptOnHost(const v1::VerifyRequest& request, const std::vector<float>& logits, size_t vocab,
                  Verdicts* verdicts) {
  size_t first_row = 0;
  std::vector<std::vector<float>> probs;
  for (const v1::VerifySequence& seq : request.sequences()) {
    const int k = seq.proposals_size();
    const auto row = [&, first_row](int i) {
      return absl::MakeConstSpan(logits).subspan((first_row + i) * vocab, vocab);
    };
    first_row += k + 1;
    probs.resize(k + 1);
    for (int i = 0; i <= k; ++i) {
      spec::ProcessLogits(row(i), ToSamplingConfig(seq.sampling()), &probs[i]);
    }
    absl::StatusOr<Accepted> accepted = Accept(seq, probs);
    if (!accepted.ok()) {
      verdicts->push_back(accepted.status());
      return;
    }
    Verdict verdict;
    verdict.committed = std::move(accepted->committed);
    verdict.accepted = std::move(accepted->accepted);
    if (seq.sampling().return_logprobs()) {
      for (size_t j = 0; j < verdict.committed.size(); ++j) {
        const int r = accepted->rows[j];
        verdict.logprobs.push_back(static_cast<float>(spec::CommittedLogProb(
            row(r), probs[r], verdict.committed[j], IsGreedy(seq.sampling()))));
      }
    }
    verdicts->push_back(std::move(verdict));
  }
}

// A verify pass's consumer: `acceptance` (on the backend, or the logits to the host),
// then `decide` (turns its result into verdicts), then `after` (may be null), all while
// the outputs are still where they were computed.
class VerifyStepConsumer final : public ForwardConsumer {
 public:
  VerifyStepConsumer(ForwardConsumer& acceptance, absl::FunctionRef<void()> decide,
                     const Verdicts& verdicts, VerdictConsumer* after)
      : acceptance_(acceptance), decide_(decide), verdicts_(verdicts), after_(after) {}
  absl::Status CheckRows(int logit_rows) const override {
    return acceptance_.CheckRows(logit_rows);
  }
  bool wants_hidden_rows() const override {
    return after_ != nullptr && after_->wants_hidden_rows();
  }
  absl::Status Consume(Backend& backend, const ForwardOutputs& outputs) override {
    absl::Status status = acceptance_.Consume(backend, outputs);
    if (!status.ok()) return status;
    decide_();
    return after_ == nullptr ? absl::OkStatus() : after_->Consume(backend, outputs, verdicts_);
  }

 private:
  ForwardConsumer& acceptance_;
  absl::FunctionRef<void()> decide_;
  const Verdicts& verdicts_;
  VerdictConsumer* after_;
};

}  // namespace

std::vector<SequenceInput> VerifyBatch(const v1::VerifyRequest& request) {
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
    if (seq.proposal_positions_size() > 0) {
      for (int i = 0; i < n; ++i) in.positions.push_back(in.start_position + i);
      in.positions.insert(in.positions.end(), seq.proposal_positions().begin(),
                          seq.proposal_positions().end());
    }
    if (seq.proposal_parents_size() > 0) {
      for (int i = 0; i < n; ++i) in.parents.push_back(i - 1);
      for (int32_t p : seq.proposal_parents()) in.parents.push_back(p < 0 ? n - 1 : n + p);
    }
    batch.push_back(std::move(in));
  }
  return batch;
}

absl::Status VerifyOnBackend(ModelExecutor* executor, const v1::VerifyRequest& request,
                             const std::vector<SequenceInput>& batch, Verdicts* verdicts,
                             VerdictConsumer* after) {
  std::vector<VerifyChain> chains;
  // A sequence whose rule parameters are invalid ends the chains: it is the last
  // verdict (sequence chains.size()), as with VerifyOnHost.
  absl::Status params_error;
  int first_row = 0;
  for (const v1::VerifySequence& seq : request.sequences()) {
    absl::StatusOr<spec::AcceptanceParams> params = ToAcceptanceParams(seq.sampling());
    if (!params.ok()) {
      params_error = params.status();
      break;
    }
    VerifyChain& chain = chains.emplace_back();
    chain.first_row = first_row;
    for (const v1::ProposedToken& p : seq.proposals()) chain.proposals.push_back(ToProposal(p));
    chain.sampling = ToSamplingConfig(seq.sampling());
    chain.params = *params;
    chain.key = KeyOf(seq);
    chain.want_logprobs = seq.sampling().return_logprobs();
    first_row += seq.proposals_size() + 1;
  }
  std::vector<VerifyOutcome> outcomes;
  VerifyAcceptConsumer accept(chains, &outcomes);
  const size_t first = verdicts->size();
  const auto decide = [&] {
    verdicts->resize(first);
    for (VerifyOutcome& outcome : outcomes) {
      if (!outcome.status.ok()) {
        verdicts->push_back(outcome.status);
        return;
      }
      Verdict verdict;
      verdict.committed = std::move(outcome.committed);
      for (int j = 0; j < outcome.num_accepted; ++j) verdict.accepted.push_back(j);
      verdict.logprobs = std::move(outcome.logprobs);
      verdicts->push_back(std::move(verdict));
    }
    if (!params_error.ok()) verdicts->push_back(params_error);
  };
  VerifyStepConsumer step(accept, decide, *verdicts, after);
  return executor->Forward(batch, step);
}

absl::Status VerifyOnHost(ModelExecutor* executor, const v1::VerifyRequest& request,
                          const std::vector<SequenceInput>& batch, Verdicts* verdicts,
                          VerdictConsumer* after) {
  std::vector<float> logits;
  HostLogitsConsumer host(&logits);
  const size_t first = verdicts->size();
  const auto decide = [&] {
    verdicts->resize(first);
    AcceptOnHost(request, logits, executor->config().vocab_size, verdicts);
  };
  VerifyStepConsumer step(host, decide, *verdicts, after);
  return executor->Forward(batch, step);
}

}  // namespace worker
}  // namespace tandem
