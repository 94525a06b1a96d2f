#include "worker/target_proposer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace worker {

void TargetProposers::Add(std::unique_ptr<TargetProposer> proposer) {
  const int method = proposer->method();
  by_method_[method] = std::move(proposer);
}

const TargetProposer* TargetProposers::Find(v1::SpeculationMethod method) const {
  auto it = by_method_.find(method);
  if (it != by_method_.end()) return it->second.get();
  return more_ != nullptr ? more_->Find(method) : nullptr;
}

std::vector<v1::SpeculationMethod> TargetProposers::methods() const {
  std::vector<v1::SpeculationMethod> out;
  for (const auto& [method, proposer] : by_method_) out.push_back(proposer->method());
  if (more_ != nullptr) {
    for (v1::SpeculationMethod m : more_->methods()) {
      if (by_method_.count(m) == 0) out.push_back(m);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

NextCandidatesStep::NextCandidatesStep(const v1::VerifyRequest& request,
                                       const TargetProposers& proposers)
    : request_(request), proposers_(proposers) {
  for (const v1::VerifySequence& seq : request.sequences()) {
    if (!seq.has_next_candidates()) continue;
    requested_ = true;
    const TargetProposer* proposer = proposers.Find(seq.next_candidates().method());
    if (proposer != nullptr && proposer->wants_hidden_rows()) wants_hidden_ = true;
  }
}

absl::Status NextCandidatesStep::Check() const {
  for (const v1::VerifySequence& seq : request_.sequences()) {
    if (seq.has_next_candidates() && proposers_.Find(seq.next_candidates().method()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "verify: sequence ", seq.sequence_id(), ": next_candidates.method ",
          v1::SpeculationMethod_Name(seq.next_candidates().method()), " is not served here"));
    }
  }
  return absl::OkStatus();
}

absl::Status NextCandidatesStep::Consume(Backend& backend, const ForwardOutputs& outputs,
                                         const Verdicts& verdicts) {
  const int n = request_.sequences_size();
  results_.assign(n, v1::NextCandidates());
  has_result_.assign(n, false);
  int first_row = 0;
  for (int s = 0; s < n && s < static_cast<int>(verdicts.size()); ++s) {
    const v1::VerifySequence& seq = request_.sequences(s);
    const int rows = seq.proposals_size() + 1;
    const int row = first_row;
    first_row += rows;
    if (!seq.has_next_candidates() || !verdicts[s].ok()) continue;
    const Verdict& verdict = *verdicts[s];
    const TargetProposer* proposer = proposers_.Find(seq.next_candidates().method());
    if (proposer == nullptr) return Check();
    TargetProposerInput in;
    in.sequence_id = seq.sequence_id();
    in.sequence = &seq;
    in.first_row = row;
    in.num_rows = rows;
    in.last_row = row + (verdict.accepted.empty() ? 0 : verdict.accepted.back() + 1);
    in.committed = &verdict.committed;
    in.last_committed_position = static_cast<int>(seq.start_position()) + seq.tokens_size() +
                                 static_cast<int>(verdict.accepted.size());
    in.max_nodes = static_cast<int>(std::max<uint32_t>(1, seq.next_candidates().max_nodes()));
    in.min_node_value = seq.next_candidates().min_node_value();
    v1::NextCandidates& out = results_[s];
    absl::Status status = proposer->Propose(backend, outputs, in, &out);
    if (!status.ok()) return status;
    out.set_method(proposer->method());
    if (out.proposals_size() > in.max_nodes) {
      return absl::InternalError(
          absl::StrCat("target proposer ", v1::SpeculationMethod_Name(proposer->method()),
                       " returned ", out.proposals_size(), " nodes, over ", in.max_nodes));
    }
    has_result_[s] = true;
  }
  return absl::OkStatus();
}

const v1::NextCandidates* NextCandidatesStep::result(int s) const {
  if (s < 0 || s >= static_cast<int>(has_result_.size()) || !has_result_[s]) return nullptr;
  return &results_[s];
}

}  // namespace worker
}  // namespace tandem
