#include "worker/draft_engine.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "spec/rng.h"
#include "spec/sampling.h"
#include "worker/sequence_sampling.h"

namespace tandem {
namespace worker {
namespace {

// Draws one proposal from a row of logits; fills `out`.
absl::Status Propose(absl::Span<const float> logits, const v1::DraftSequence& seq,
                     int top_k, int64_t position, std::vector<float>* probs,
                     v1::ProposedToken* out) {
  spec::SparseDistribution q;
  int32_t token;
  if (IsGreedy(seq.sampling())) {
    token = spec::Argmax(logits);
    q = spec::PointMass(token);
  } else {
    spec::ProcessLogits(logits, ToSamplingConfig(seq.sampling()), probs);
    q = spec::TopKSparse(*probs, top_k);
    const double u = spec::UniformDouble(seq.sampling().seed(), spec::RandomStream::kDraftSample,
                                         static_cast<uint64_t>(position));
    token = spec::SampleFromSparse(q, u);
  }
  if (token < 0) {
    return absl::InternalError(absl::StrCat("draft: sequence ", seq.sequence_id(),
                                            " has no finite logits at position ", position));
  }
  out->set_token(token);
  out->mutable_q_ids()->Assign(q.ids.begin(), q.ids.end());
  out->mutable_q_probs()->Assign(q.probs.begin(), q.probs.end());
  return absl::OkStatus();
}

}  // namespace

DraftEngine::DraftEngine(ModelExecutor* executor, const DraftEngineOptions& options)
    : executor_(executor), options_(options) {}

absl::Status DraftEngine::CheckCapacity(const v1::DraftRequest& request) const {
  const KvCacheStats kv = executor_->kv_stats();
  const auto blocks = [&](int64_t length) { return (length + kv.block_size - 1) / kv.block_size; };
  int64_t needed = 0;
  for (const v1::DraftSequence& seq : request.sequences()) {
    absl::StatusOr<int> cached = executor_->CachedLength(seq.sequence_id());
    const int64_t held = cached.ok() ? blocks(*cached) : 0;
    const int64_t k = std::max<int64_t>(seq.num_draft_tokens(), 1);
    needed += blocks(int64_t{seq.start_position()} + seq.tokens_size() + k - 1) - held;
  }
  if (needed > kv.free_blocks) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache full: drafting needs ", needed, " more blocks of ", kv.block_size,
        " tokens but only ", kv.free_blocks, " of ", kv.total_blocks,
        " are free; release or shorten sequences"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DraftResponse> DraftEngine::Draft(const v1::DraftRequest& request) {
  if (absl::Status status = CheckCapacity(request); !status.ok()) return status;
  const int n = request.sequences_size();
  const int vocab = executor_->config().vocab_size;
  const double forward_ms_before = executor_->times().forward_ms;

  v1::DraftResponse response;
  std::vector<int> top_k(n);
  std::vector<int64_t> next_position(n);  // Position of the next proposal.
  int max_k = 0;
  std::vector<SequenceInput> batch;
  batch.reserve(n);
  for (int s = 0; s < n; ++s) {
    const v1::DraftSequence& seq = request.sequences(s);
    v1::DraftedSequence* out = response.add_sequences();
    out->set_sequence_id(seq.sequence_id());
    top_k[s] = seq.proposal_top_k() > 0 ? static_cast<int>(seq.proposal_top_k())
                                        : options_.default_proposal_top_k;
    next_position[s] = int64_t{seq.start_position()} + seq.tokens_size();
    max_k = std::max(max_k, static_cast<int>(seq.num_draft_tokens()));
    SequenceInput in;
    in.seq_id = seq.sequence_id();
    in.start_position = static_cast<int>(seq.start_position());
    in.tokens.assign(seq.tokens().begin(), seq.tokens().end());
    if (!in.tokens.empty()) in.logit_indices = {static_cast<int32_t>(in.tokens.size()) - 1};
    batch.push_back(std::move(in));
  }

  std::vector<float> logits, probs;
  std::vector<int> rows;  // Request index of each row of the current pass.
  for (int s = 0; s < n; ++s) rows.push_back(s);
  for (int i = 0; i < max_k; ++i) {
    absl::Status status = executor_->Forward(batch, &logits);
    if (!status.ok()) return status;
    std::vector<SequenceInput> next;
    std::vector<int> next_rows;
    for (size_t r = 0; r < rows.size(); ++r) {
      const int s = rows[r];
      const v1::DraftSequence& seq = request.sequences(s);
      v1::DraftedSequence* out = response.mutable_sequences(s);
      if (static_cast<uint32_t>(i) >= seq.num_draft_tokens()) continue;
      absl::Span<const float> row(logits.data() + r * vocab, vocab);
      status = Propose(row, seq, top_k[s], next_position[s], &probs, out->add_proposals());
      if (!status.ok()) return status;
      // Feed this proposal when the sequence needs another one.
      if (static_cast<uint32_t>(i + 1) < seq.num_draft_tokens()) {
        SequenceInput in;
        in.seq_id = seq.sequence_id();
        in.start_position = static_cast<int>(next_position[s]);
        in.tokens = {out->proposals(i).token()};
        in.logit_indices = {0};
        next.push_back(std::move(in));
        next_rows.push_back(s);
      }
      ++next_position[s];
    }
    if (next.empty()) break;
    batch = std::move(next);
    rows = std::move(next_rows);
  }
  for (int s = 0; s < n; ++s) {
    const v1::DraftSequence& seq = request.sequences(s);
    absl::StatusOr<int> cached = executor_->CachedLength(seq.sequence_id());
    response.mutable_sequences(s)->set_cached_length(cached.ok() ? *cached : 0);
  }
  response.set_compute_ms(
      static_cast<float>(executor_->times().forward_ms - forward_ms_before));
  return response;
}

}  // namespace worker
}  // namespace tandem
