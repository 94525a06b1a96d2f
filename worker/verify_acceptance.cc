#include "worker/verify_acceptance.h"

#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "kernels/accept/verify_accept.h"
#include "model/output_consumers.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {
namespace {

// The random key of a sequence: its first proposal (row 1) sits at absolute position
// start_position + tokens_size (the last committed token is at the one before).
spec::RandomKey KeyOf(const v1::VerifySequence& seq) {
  return spec::RandomKey{seq.sampling().seed(), seq.sample_index(),
                         uint64_t{seq.start_position()} + uint64_t(seq.tokens_size())};
}

// A verify pass's consumer: `acceptance` (on the backend), then `decide` (turns its
// result into verdicts), then `after` (may be null), all while the outputs are still
// where they were computed.
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
  // verdict (sequence chains.size()).
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
    // Only the acceptable proposals (a prefix, their parents inside it) are the chain's;
    // the computed-only rest keeps its rows but is never accepted.
    const int acceptable = AcceptableProposals(seq);
    for (int i = 0; i < acceptable; ++i) chain.proposals.push_back(ToProposal(seq.proposals(i)));
    if (seq.proposal_parents_size() > 0) {
      chain.parents.assign(seq.proposal_parents().begin(),
                           seq.proposal_parents().begin() + acceptable);
    }
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
      verdict.accepted = std::move(outcome.path);
      verdict.logprobs = std::move(outcome.logprobs);
      verdicts->push_back(std::move(verdict));
    }
    if (!params_error.ok()) verdicts->push_back(params_error);
  };
  VerifyStepConsumer step(accept, decide, *verdicts, after);
  return executor->Forward(batch, step);
}

}  // namespace worker
}  // namespace tandem
