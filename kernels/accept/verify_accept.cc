#include "kernels/accept/verify_accept.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "spec/tree_acceptance.h"

namespace tandem {

absl::Status ValidateLogitsView(const LogitsView& view) {
  if (view.rows < 0 || view.vocab <= 0 || view.parts <= 0 || view.vocab % view.parts != 0 ||
      (view.rows > 0 && view.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("logits view: rows ", view.rows, ", vocab ",
                                                   view.vocab, ", parts ", view.parts,
                                                   view.data == nullptr ? ", no data" : ""));
  }
  return absl::OkStatus();
}

absl::Status ToRowMajor(const LogitsView& view, std::vector<float>* out) {
  absl::Status status = ValidateLogitsView(view);
  if (!status.ok()) return status;
  const size_t rows = view.rows, vocab = view.vocab, slice = vocab / view.parts;
  out->resize(rows * vocab);
  for (size_t part = 0; part < size_t(view.parts); ++part) {
    for (size_t r = 0; r < rows; ++r) {
      const float* src = view.data + (part * rows + r) * slice;
      std::copy(src, src + slice, out->data() + r * vocab + part * slice);
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateChainRows(absl::Span<const VerifyChain> chains, int rows) {
  for (size_t c = 0; c < chains.size(); ++c) {
    const int64_t first = chains[c].first_row;
    const int64_t last = first + static_cast<int64_t>(chains[c].proposals.size());
    if (first < 0 || last >= rows) {
      return absl::InvalidArgumentError(absl::StrCat("verify chain ", c, ": logit rows ", first,
                                                     "..", last, " outside [0, ", rows, ")"));
    }
    const std::vector<int32_t>& parents = chains[c].parents;
    if (!parents.empty() && parents.size() != chains[c].proposals.size()) {
      return absl::InvalidArgumentError(absl::StrCat("verify chain ", c, ": ", parents.size(),
                                                     " parents for ", chains[c].proposals.size(),
                                                     " proposals"));
    }
    for (size_t i = 0; i < parents.size(); ++i) {
      if (parents[i] < -1 || parents[i] >= static_cast<int64_t>(i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "verify chain ", c, ": parents[", i, "] = ", parents[i], " outside [-1, ", i, ")"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The acceptance of one chain or tree over its processed rows `spans`.
absl::Status Accept(const VerifyChain& chain, absl::Span<const absl::Span<const float>> spans,
                    VerifyOutcome* out) {
  if (chain.parents.empty()) {
    absl::StatusOr<spec::AcceptanceResult> result =
        spec::AcceptProposals(chain.proposals, spans, chain.params, chain.key);
    if (!result.ok()) return result.status();
    out->committed = std::move(result->committed);
    out->num_accepted = result->num_accepted;
    for (int j = 0; j < out->num_accepted; ++j) out->path.push_back(j);
    return absl::OkStatus();
  }
  absl::StatusOr<spec::TreeAcceptanceResult> result =
      spec::AcceptTree(chain.parents, chain.proposals, spans, chain.params, chain.key);
  if (!result.ok()) return result.status();
  out->committed = std::move(result->committed);
  out->num_accepted = result->num_accepted;
  out->path = std::move(result->path);
  return absl::OkStatus();
}

}  // namespace

absl::Status HostVerifyAccept(absl::Span<const float> logits, int vocab,
                              absl::Span<const VerifyChain> chains,
                              std::vector<VerifyOutcome>* outcomes) {
  if (vocab <= 0 || logits.size() % size_t(vocab) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("verify: ", logits.size(), " logits are not rows of vocab ", vocab));
  }
  const int rows = static_cast<int>(logits.size() / vocab);
  absl::Status status = ValidateChainRows(chains, rows);
  if (!status.ok()) return status;
  outcomes->clear();
  outcomes->resize(chains.size());
  std::vector<std::vector<float>> probs;
  std::vector<absl::Span<const float>> spans;
  for (size_t c = 0; c < chains.size(); ++c) {
    const VerifyChain& chain = chains[c];
    const size_t k = chain.proposals.size();
    const auto row = [&](size_t i) {
      return logits.subspan((size_t(chain.first_row) + i) * vocab, vocab);
    };
    probs.resize(k + 1);
    spans.clear();
    for (size_t i = 0; i <= k; ++i) {
      spec::ProcessLogits(row(i), chain.sampling, &probs[i]);
      spans.push_back(probs[i]);
    }
    VerifyOutcome& out = (*outcomes)[c];
    absl::Status accepted = Accept(chain, spans, &out);
    if (!accepted.ok()) {
      out = VerifyOutcome();
      out.status = accepted;
      continue;
    }
    if (!chain.want_logprobs) continue;
    const bool greedy = !(chain.sampling.temperature > 0.0f);
    for (size_t j = 0; j < out.committed.size(); ++j) {
      // Token j is drawn from row j of a chain, from the row after node path[j - 1] of a tree.
      const size_t r = j == 0 || chain.parents.empty() ? j : size_t(out.path[j - 1]) + 1;
      out.logprobs.push_back(
          static_cast<float>(spec::CommittedLogProb(row(r), probs[r], out.committed[j], greedy)));
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem
