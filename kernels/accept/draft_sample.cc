#include "kernels/accept/draft_sample.h"

#include "absl/strings/str_cat.h"
#include "spec/rng.h"

namespace tandem {
namespace {

// The `k` most likely tokens of `probs` with their probabilities as they are.
spec::SparseDistribution TopTokens(absl::Span<const float> probs, int k) {
  spec::SparseDistribution top = spec::TopKSparse(probs, k);
  for (size_t j = 0; j < top.ids.size(); ++j) top.probs[j] = probs[top.ids[j]];
  return top;
}

}  // namespace

absl::Status NoDraftTokenError(size_t index) {
  return absl::InvalidArgumentError(
      absl::StrCat("draft row ", index, ": no token to propose (no finite logits)"));
}

absl::Status ValidateDraftRows(absl::Span<const DraftRow> drafts, int rows) {
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (drafts[i].row < 0 || drafts[i].row >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft row ", i, ": logit row ", drafts[i].row, " outside [0, ", rows, ")"));
    }
    if (drafts[i].q_size < 1 || drafts[i].q_size > kMaxDraftQSize) {
      return absl::InvalidArgumentError(absl::StrCat("draft row ", i, ": q_size ", drafts[i].q_size,
                                                     " outside [1, ", kMaxDraftQSize, "]"));
    }
    if (drafts[i].top < 0 || drafts[i].top > kMaxDraftTop) {
      return absl::InvalidArgumentError(absl::StrCat("draft row ", i, ": top ", drafts[i].top,
                                                     " outside [0, ", kMaxDraftTop, "]"));
    }
  }
  return absl::OkStatus();
}

bool AnyDraftTop(absl::Span<const DraftRow> drafts) {
  for (const DraftRow& d : drafts) {
    if (d.top > 0) return true;
  }
  return false;
}

absl::Status HostSampleDrafts(absl::Span<const float> logits, int vocab,
                              absl::Span<const DraftRow> drafts,
                              std::vector<DraftProposal>* proposals) {
  if (vocab <= 0 || logits.size() % size_t(vocab) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft: ", logits.size(), " logits are not rows of vocab ", vocab));
  }
  absl::Status status = ValidateDraftRows(drafts, static_cast<int>(logits.size() / vocab));
  if (!status.ok()) return status;
  proposals->clear();
  proposals->resize(drafts.size());
  std::vector<float> probs;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const DraftRow& draft = drafts[i];
    const absl::Span<const float> row = logits.subspan(size_t(draft.row) * vocab, vocab);
    DraftProposal& out = (*proposals)[i];
    if (!(draft.sampling.temperature > 0.0f)) {
      out.token = spec::Argmax(row);
      if (out.token >= 0) out.q = spec::PointMass(out.token);
      if (draft.top > 0) {
        spec::SamplingConfig plain;
        plain.temperature = 1.0f;
        spec::ProcessLogits(row, plain, &probs);
      }
    } else if (draft.coupled) {
      spec::ProcessLogits(row, draft.sampling, &probs);
      out.token = spec::GumbelSample(probs, draft.seed, draft.position);
      if (out.token >= 0) out.q = spec::PointMass(out.token);
    } else {
      spec::ProcessLogits(row, draft.sampling, &probs);
      out.q = spec::TopKSparse(probs, draft.q_size);
      out.token = spec::SampleFromSparse(
          out.q, spec::UniformDouble(draft.seed, spec::RandomStream::kDraftSample, draft.position));
    }
    if (draft.top > 0 && out.token >= 0) out.top = TopTokens(probs, draft.top);
    if (out.token < 0) {
      out.q = spec::SparseDistribution();
      out.status = NoDraftTokenError(i);
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem
