// CudaBackend::VerifyAccept and CudaBackend::SampleDrafts (contracts in cuda_backend.h):
// the packed inputs go up in one staged copy, the kernels (accept_kernels.h) run on the
// logits where they are, and only the small outputs come back in one copy.
//
// Never executed on a GPU in the environment this was written in.
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/accept/packed_batch.h"
#include "kernels/cuda/accept_kernels.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_internal.h"

namespace tandem {
namespace {

constexpr size_t kAlign = 16;

// One device allocation holding, in order, the inputs (uploaded as one blob), the
// outputs (copied back as one block) and the workspaces. Arrays are placed with Input /
// Output / Workspace before Finish; their offsets are 16-byte aligned.
class DeviceArena {
 public:
  template <typename T>
  size_t Input(const std::vector<T>& values) {
    const size_t offset = Place(values.size() * sizeof(T));
    inputs_.resize(cursor_);
    if (!values.empty())
      std::memcpy(inputs_.data() + offset, values.data(), values.size() * sizeof(T));
    inputs_end_ = cursor_;
    return offset;
  }
  template <typename T>
  size_t Output(size_t count) {
    if (!has_outputs_) outputs_begin_ = cursor_;
    has_outputs_ = true;
    const size_t offset = Place(count * sizeof(T));
    outputs_end_ = cursor_;
    return offset;
  }
  template <typename T>
  size_t Workspace(size_t count) {
    return Place(count * sizeof(T));
  }

  // Allocates the arena from `pool` and uploads the inputs on `stream`.
  absl::Status Upload(cuda::DevicePool& pool, cuda::PinnedStaging& staging, cudaStream_t stream) {
    absl::StatusOr<std::shared_ptr<void>> memory = pool.Acquire(cursor_);
    if (!memory.ok()) return memory.status();
    memory_ = *std::move(memory);
    return staging.Stage(inputs_.data(), inputs_end_, memory_.get(), stream);
  }
  template <typename T>
  T* At(size_t offset) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(memory_.get()) + offset);
  }
  // The outputs block: device address and size.
  uint8_t* outputs() const { return At<uint8_t>(outputs_begin_); }
  size_t outputs_bytes() const { return outputs_end_ - outputs_begin_; }
  // Copies `count` values of the output at `offset` out of a host copy of the block.
  template <typename T>
  void Read(const std::vector<uint8_t>& block, size_t offset, std::vector<T>* out) const {
    if (!out->empty()) {
      std::memcpy(out->data(), block.data() + (offset - outputs_begin_), out->size() * sizeof(T));
    }
  }

 private:
  size_t Place(size_t bytes) {
    const size_t offset = cursor_;
    cursor_ = (cursor_ + bytes + kAlign - 1) / kAlign * kAlign;
    return offset;
  }

  size_t cursor_ = 0, inputs_end_ = 0, outputs_begin_ = 0, outputs_end_ = 0;
  bool has_outputs_ = false;
  std::vector<uint8_t> inputs_;
  std::shared_ptr<void> memory_;
};

accept::LogitsRef Ref(const LogitsView& logits) {
  return accept::LogitsRef{logits.data, logits.rows, logits.vocab, logits.parts};
}

}  // namespace

absl::Status CudaBackend::VerifyAccept(const LogitsView& logits,
                                       absl::Span<const VerifyChain> chains,
                                       std::vector<VerifyOutcome>* outcomes) {
  if (absl::Status s = ValidateLogitsView(logits); !s.ok()) return s;
  if (absl::Status s = ValidateChainRows(chains, logits.rows); !s.ok()) return s;
  if (!state_->first_error.ok()) return state_->first_error;
  outcomes->clear();
  if (chains.empty()) return absl::OkStatus();
  if (absl::Status s = cuda::SelectDevice(device()); !s.ok()) return s;

  const accept::PackedBatch batch = accept::PackChains(chains);
  accept::PackedOutputs packed;
  accept::ResizeOutputs(batch, &packed);
  DeviceArena arena;
  const size_t chains_at = arena.Input(batch.chains);
  const size_t tokens_at = arena.Input(batch.tokens);
  const size_t q_begin_at = arena.Input(batch.q_begin);
  const size_t q_ids_at = arena.Input(batch.q_ids);
  const size_t q_probs_at = arena.Input(batch.q_probs);
  const size_t parents_at = arena.Input(batch.parents);
  const size_t status_at = arena.Output<accept::PackedStatus>(packed.status.size());
  const size_t out_tokens_at = arena.Output<int32_t>(packed.tokens.size());
  const size_t out_logprobs_at = arena.Output<float>(packed.logprobs.size());
  const size_t out_path_at = arena.Output<int32_t>(packed.path.size());
  const size_t rows_entries = chains.size() * size_t(logits.vocab);
  const size_t probs_at = arena.Workspace<float>(rows_entries);
  const size_t weights_at = arena.Workspace<double>(rows_entries);
  const size_t residual_at = arena.Workspace<double>(batch.any_rejection_tree ? rows_entries : 0);
  const size_t node_values_at = arena.Workspace<double>(batch.tokens.size());
  if (absl::Status s = arena.Upload(*state_->pool, *state_->staging, state_->stream); !s.ok()) {
    return s;
  }

  accept::BatchView view;
  view.logits = Ref(logits);
  view.chains = arena.At<const accept::PackedChain>(chains_at);
  view.num_chains = static_cast<int32_t>(batch.chains.size());
  view.tokens = arena.At<const int32_t>(tokens_at);
  view.q_begin = arena.At<const int32_t>(q_begin_at);
  view.q_ids = arena.At<const int32_t>(q_ids_at);
  view.q_probs = arena.At<const float>(q_probs_at);
  view.parents = arena.At<const int32_t>(parents_at);
  view.probs = arena.At<float>(probs_at);
  view.weights = arena.At<double>(weights_at);
  view.residual = batch.any_rejection_tree ? arena.At<double>(residual_at) : nullptr;
  view.node_values = arena.At<double>(node_values_at);
  view.out_tokens = arena.At<int32_t>(out_tokens_at);
  view.out_logprobs = arena.At<float>(out_logprobs_at);
  view.out_path = arena.At<int32_t>(out_path_at);
  view.out_status = arena.At<accept::PackedStatus>(status_at);
  Record(cuda::LaunchVerifyAccept(view, state_->stream), "VerifyAccept");

  std::vector<uint8_t> block(arena.outputs_bytes());
  if (absl::Status s = CopyToHost(arena.outputs(), block.data(), block.size()); !s.ok()) return s;
  arena.Read(block, status_at, &packed.status);
  arena.Read(block, out_tokens_at, &packed.tokens);
  arena.Read(block, out_logprobs_at, &packed.logprobs);
  arena.Read(block, out_path_at, &packed.path);
  return accept::UnpackOutcomes(batch, packed, outcomes);
}

absl::Status CudaBackend::SampleDrafts(const LogitsView& logits, absl::Span<const DraftRow> drafts,
                                       std::vector<DraftProposal>* proposals) {
  if (absl::Status s = ValidateLogitsView(logits); !s.ok()) return s;
  if (absl::Status s = ValidateDraftRows(drafts, logits.rows); !s.ok()) return s;
  if (!state_->first_error.ok()) return state_->first_error;
  // Top tokens (outcome ranking) have no kernel yet: the host reference answers.
  if (AnyDraftTop(drafts)) return Backend::SampleDrafts(logits, drafts, proposals);
  proposals->clear();
  if (drafts.empty()) return absl::OkStatus();
  if (absl::Status s = cuda::SelectDevice(device()); !s.ok()) return s;

  const accept::PackedDrafts packed = accept::PackDrafts(drafts);
  accept::PackedDraftOutputs outputs;
  accept::ResizeDraftOutputs(packed, &outputs);
  DeviceArena arena;
  const size_t rows_at = arena.Input(packed.rows);
  const size_t tokens_at = arena.Output<int32_t>(outputs.tokens.size());
  const size_t counts_at = arena.Output<int32_t>(outputs.q_counts.size());
  const size_t ids_at = arena.Output<int32_t>(outputs.q_ids.size());
  const size_t q_probs_at = arena.Output<float>(outputs.q_probs.size());
  const size_t probs_at = arena.Workspace<float>(drafts.size() * size_t(logits.vocab));
  const size_t weights_at = arena.Workspace<double>(drafts.size() * size_t(logits.vocab));
  if (absl::Status s = arena.Upload(*state_->pool, *state_->staging, state_->stream); !s.ok()) {
    return s;
  }

  accept::DraftView view;
  view.logits = Ref(logits);
  view.drafts = arena.At<const accept::PackedDraftRow>(rows_at);
  view.num_drafts = static_cast<int32_t>(packed.rows.size());
  view.probs = arena.At<float>(probs_at);
  view.weights = arena.At<double>(weights_at);
  view.out_tokens = arena.At<int32_t>(tokens_at);
  view.out_q_counts = arena.At<int32_t>(counts_at);
  view.out_q_ids = arena.At<int32_t>(ids_at);
  view.out_q_probs = arena.At<float>(q_probs_at);
  Record(cuda::LaunchSampleDrafts(view, state_->stream), "SampleDrafts");

  std::vector<uint8_t> block(arena.outputs_bytes());
  if (absl::Status s = CopyToHost(arena.outputs(), block.data(), block.size()); !s.ok()) return s;
  arena.Read(block, tokens_at, &outputs.tokens);
  arena.Read(block, counts_at, &outputs.q_counts);
  arena.Read(block, ids_at, &outputs.q_ids);
  arena.Read(block, q_probs_at, &outputs.q_probs);
  return accept::UnpackDrafts(packed, outputs, proposals);
}

}  // namespace tandem
