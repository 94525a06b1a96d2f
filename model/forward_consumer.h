// The output seam of a LlamaModel forward pass: the model computes, a ForwardConsumer
// decides what leaves the pass (host logits, acceptance outcomes, draft proposals, the
// candidates of a target-side proposer), reading the outputs where they are.
//
// How a consumer reaches its device implementation: it is handed the Backend that
// holds the outputs and calls that backend's op for it (e.g. Backend::VerifyAccept),
// whose default runs the host reference on a copy and which a device backend
// overrides with its kernels. A new on-device op is therefore one consumer plus its
// Backend op and kernels; the model, the executors and the group leader only forward
// consumers and never learn about it.
#ifndef TANDEM_MODEL_FORWARD_CONSUMER_H_
#define TANDEM_MODEL_FORWARD_CONSUMER_H_

#include "absl/status/status.h"
#include "kernels/accept/verify_accept.h"
#include "kernels/backend.h"

namespace tandem {

// What one forward pass produced, in backend memory, valid only during
// ForwardConsumer::Consume.
struct ForwardOutputs {
  // The requested logit rows: batch order, then logit_indices order within a
  // sequence; rank-major parts (LogitsView::parts = tp size) at tp > 1. data is null
  // when no row was requested.
  LogitsView logits;
  // The final-normed hidden state of the same rows (the LM head's input): row-major
  // [logits.rows, hidden_size] float32. At tp > 1 every rank holds full rows (the
  // residual stream is all-reduced). Null unless the consumer wants_hidden_rows() and
  // a row was requested.
  const float* hidden_rows = nullptr;
  int hidden_size = 0;
};

// Receives the outputs of one forward pass. A consumer is used by one call at a time.
class ForwardConsumer {
 public:
  virtual ~ForwardConsumer() = default;

  // Checked after the batch is validated and before anything changes (no cache
  // effect, no collective, no broadcast to a group): `logit_rows` is
  // CountLogitRows(batch). INVALID_ARGUMENT when the consumer's own inputs do not fit
  // (e.g. a chain past the rows). Must give the same answer on every call.
  virtual absl::Status CheckRows(int logit_rows) const = 0;

  // Whether Consume needs ForwardOutputs::hidden_rows.
  virtual bool wants_hidden_rows() const { return false; }

  // Runs once per successful computation with `backend`, the backend holding
  // `outputs`. Must leave the backend synchronized when it returns OK. An error fails
  // the forward like a failed computation: the batch is rolled back.
  virtual absl::Status Consume(Backend& backend, const ForwardOutputs& outputs) = 0;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_FORWARD_CONSUMER_H_
