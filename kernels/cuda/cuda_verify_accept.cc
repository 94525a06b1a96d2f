// CudaBackend::VerifyAccept (contract in cuda_backend.h): packs the chains, uploads them
// in one staged copy, runs the acceptance kernel on the logits where they are and
// copies back only the per-chain statuses, committed tokens and log-probabilities.
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
size_t AlignUp(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the arrays of one packed batch inside one device allocation: the
// inputs first (uploaded as one blob), then the outputs (copied back as one block),
// then the workspaces.
struct DeviceLayout {
  size_t chains = 0, tokens = 0, q_begin = 0, q_ids = 0, q_probs = 0, inputs_end = 0;
  size_t status = 0, out_tokens = 0, out_logprobs = 0, outputs_end = 0;
  size_t probs = 0, weights = 0, total = 0;
};

template <typename T>
size_t Place(size_t* cursor, size_t count) {
  const size_t offset = *cursor;
  *cursor = AlignUp(offset + count * sizeof(T));
  return offset;
}

DeviceLayout LayOut(const accept::PackedBatch& batch, int vocab) {
  DeviceLayout l;
  size_t cursor = 0;
  l.chains = Place<accept::PackedChain>(&cursor, batch.chains.size());
  l.tokens = Place<int32_t>(&cursor, batch.tokens.size());
  l.q_begin = Place<int32_t>(&cursor, batch.q_begin.size());
  l.q_ids = Place<int32_t>(&cursor, batch.q_ids.size());
  l.q_probs = Place<float>(&cursor, batch.q_probs.size());
  l.inputs_end = cursor;
  l.status = Place<accept::PackedStatus>(&cursor, batch.chains.size());
  l.out_tokens = Place<int32_t>(&cursor, batch.num_outputs);
  l.out_logprobs = Place<float>(&cursor, batch.num_outputs);
  l.outputs_end = cursor;
  l.probs = Place<float>(&cursor, batch.chains.size() * size_t(vocab));
  l.weights = Place<double>(&cursor, batch.chains.size() * size_t(vocab));
  l.total = cursor;
  return l;
}

template <typename T>
void CopyInto(std::vector<uint8_t>* blob, size_t offset, const std::vector<T>& values) {
  if (!values.empty()) std::memcpy(blob->data() + offset, values.data(), values.size() * sizeof(T));
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
  const DeviceLayout layout = LayOut(batch, logits.vocab);
  std::vector<uint8_t> inputs(layout.inputs_end);
  CopyInto(&inputs, layout.chains, batch.chains);
  CopyInto(&inputs, layout.tokens, batch.tokens);
  CopyInto(&inputs, layout.q_begin, batch.q_begin);
  CopyInto(&inputs, layout.q_ids, batch.q_ids);
  CopyInto(&inputs, layout.q_probs, batch.q_probs);
  absl::StatusOr<std::shared_ptr<void>> memory = state_->pool->Acquire(layout.total);
  if (!memory.ok()) return memory.status();
  uint8_t* base = static_cast<uint8_t*>(memory->get());
  if (absl::Status s = state_->staging->Stage(inputs.data(), inputs.size(), base, state_->stream);
      !s.ok()) {
    return s;
  }

  accept::BatchView view;
  view.logits = logits.data;
  view.rows = logits.rows;
  view.vocab = logits.vocab;
  view.parts = logits.parts;
  view.chains = reinterpret_cast<const accept::PackedChain*>(base + layout.chains);
  view.num_chains = static_cast<int32_t>(batch.chains.size());
  view.tokens = reinterpret_cast<const int32_t*>(base + layout.tokens);
  view.q_begin = reinterpret_cast<const int32_t*>(base + layout.q_begin);
  view.q_ids = reinterpret_cast<const int32_t*>(base + layout.q_ids);
  view.q_probs = reinterpret_cast<const float*>(base + layout.q_probs);
  view.probs = reinterpret_cast<float*>(base + layout.probs);
  view.weights = reinterpret_cast<double*>(base + layout.weights);
  view.out_tokens = reinterpret_cast<int32_t*>(base + layout.out_tokens);
  view.out_logprobs = reinterpret_cast<float*>(base + layout.out_logprobs);
  view.out_status = reinterpret_cast<accept::PackedStatus*>(base + layout.status);
  Record(cuda::LaunchVerifyAccept(view, state_->stream), "VerifyAccept");

  std::vector<uint8_t> outputs(layout.outputs_end - layout.status);
  if (absl::Status s = CopyToHost(base + layout.status, outputs.data(), outputs.size()); !s.ok()) {
    return s;
  }
  accept::PackedOutputs packed;
  accept::ResizeOutputs(batch, &packed);
  const auto copy_out = [&](size_t offset, void* dst, size_t bytes) {
    if (bytes > 0) std::memcpy(dst, outputs.data() + (offset - layout.status), bytes);
  };
  copy_out(layout.status, packed.status.data(), packed.status.size() * sizeof(accept::PackedStatus));
  copy_out(layout.out_tokens, packed.tokens.data(), packed.tokens.size() * sizeof(int32_t));
  copy_out(layout.out_logprobs, packed.logprobs.data(), packed.logprobs.size() * sizeof(float));
  return accept::UnpackOutcomes(batch, packed, outcomes);
}

}  // namespace tandem
