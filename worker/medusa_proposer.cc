#include "worker/medusa_proposer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace worker {

std::vector<int32_t> TopKIndices(const float* row, int n, int k) {
  k = std::max(0, std::min(k, n));
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [row](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  ids.resize(k);
  return ids;
}

void BuildMedusaTree(const std::vector<std::vector<int>>& choices,
                     const std::vector<std::vector<int32_t>>& top,
                     const std::vector<std::vector<float>>& probs, int max_nodes, double min_value,
                     v1::NextCandidates* out) {
  const int n = std::min<int>(max_nodes, static_cast<int>(choices.size()));
  std::map<std::vector<int>, std::pair<int, double>> index;  // Path -> node, value.
  std::vector<int32_t> parents;
  bool chain = true;
  for (int i = 0; i < n; ++i) {
    const std::vector<int>& path = choices[i];
    const int depth = static_cast<int>(path.size());
    int parent = -1;
    double value = 1;
    if (depth > 1) {
      auto it = index.find(std::vector<int>(path.begin(), path.end() - 1));
      if (it == index.end()) continue;  // Its parent was not worth its row.
      std::tie(parent, value) = it->second;
    }
    if (depth - 1 < static_cast<int>(probs.size())) value *= probs[depth - 1][path.back()];
    // The first path is kept whatever its value, so that a step always offers the
    // controller a candidate to weigh (as a draft tree keeps its chain).
    if (i > 0 && !(value > min_value)) continue;
    const int node = static_cast<int>(parents.size());
    chain &= parent == node - 1;
    index[path] = {node, value};
    parents.push_back(parent);
    v1::ProposedToken* p = out->add_proposals();
    const int32_t token = top[depth - 1][path.back()];
    p->set_token(token);
    p->add_q_ids(token);
    p->add_q_probs(1.0f);
  }
  if (!chain) out->mutable_parents()->Assign(parents.begin(), parents.end());
}

std::vector<float> SoftmaxAt(const float* logits, int n, const std::vector<int32_t>& ids) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  std::vector<float> p;
  for (int32_t id : ids) p.push_back(static_cast<float>(std::exp(double(logits[id] - max)) / sum));
  return p;
}

absl::Status MedusaTargetProposer::Propose(Backend& backend, const ForwardOutputs& outputs,
                                           const TargetProposerInput& in,
                                           v1::NextCandidates* out) const {
  (void)backend;  // The heads were uploaded to this same backend at start-up.
  const MedusaConfig& config = heads_->config();
  if (outputs.hidden_rows == nullptr || in.last_row < 0 || in.last_row >= outputs.logits.rows) {
    return absl::InternalError(absl::StrCat("medusa: no hidden row ", in.last_row, " in the pass"));
  }
  if (outputs.hidden_size != heads_->hidden_size()) {
    return absl::InternalError(absl::StrCat("medusa: hidden rows of size ", outputs.hidden_size,
                                            ", the heads take ", heads_->hidden_size()));
  }
  const float* row = outputs.hidden_rows + static_cast<size_t>(in.last_row) * outputs.hidden_size;
  // Only the heads and ranks the first max_nodes paths use.
  const int depth = config.Depth(in.max_nodes), k = config.TopK(in.max_nodes);
  absl::Status status = heads_->Forward(row, &logits_, depth);
  if (!status.ok()) return status;
  const int vocab = heads_->vocab_size();
  std::vector<std::vector<int32_t>> top;
  std::vector<std::vector<float>> probs;
  for (int d = 0; d < depth; ++d) {
    const float* head = logits_.data() + static_cast<size_t>(d) * vocab;
    top.push_back(TopKIndices(head, vocab, k));
    if (in.min_node_value > 0) probs.push_back(SoftmaxAt(head, vocab, top.back()));
  }
  BuildMedusaTree(config.choices, top, probs, in.max_nodes, in.min_node_value, out);
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace tandem
