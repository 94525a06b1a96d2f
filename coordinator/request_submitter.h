// Submits public GenerateRequests to the engine and follows one request's output to its
// end. Shared by the gRPC service (coordinator/tandem_service.h) and the OpenAI-compatible
// HTTP API (coordinator/openai_server.h), so that both validate, tokenise, admit and
// cancel requests the same way. Thread-safe (const after construction).
#ifndef TANDEM_COORDINATOR_REQUEST_SUBMITTER_H_
#define TANDEM_COORDINATOR_REQUEST_SUBMITTER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/chat_prompt.h"
#include "coordinator/engine.h"
#include "coordinator/output_channel.h"
#include "coordinator/request_validation.h"
#include "model/tokenizer.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::coordinator {

// A request the engine accepted.
struct SubmittedRequest {
  std::shared_ptr<Sequence> sequence;
  std::shared_ptr<OutputChannel> channel;  // The engine's output for it.
  std::string request_id;                  // The client's id or the one assigned.
  int prompt_tokens = 0;                   // After tokenisation.
};

// How Follow reaches the client of one request.
struct ClientLink {
  // Hands a chunk to the client; false when that failed (the client is gone).
  std::function<bool(OutputChunk&)> deliver;
  // Whether the client has gone away (cancelled, disconnected, past its deadline);
  // asked about every 20 ms while no output is ready.
  std::function<bool()> gone;
  // The status a request whose client went away ends with (CANCELLED or
  // DEADLINE_EXCEEDED).
  std::function<absl::Status()> gone_status;
};

class RequestSubmitter {
 public:
  // `engine` must be started; it and `tokenizer` must outlive the submitter. `chat`
  // renders chat prompts (null: the model has no chat template).
  RequestSubmitter(Engine* engine, const Tokenizer* tokenizer, ServerLimits limits,
                   ChatRenderer chat = nullptr);

  // Renders a chat prompt to text (coordinator/chat_prompt.h has its errors), validates
  // `request` against the limits (INVALID_ARGUMENT / FAILED_PRECONDITION naming the
  // field), tokenises a text prompt (BOS prepended) and queues it with `deadline`
  // (absl::InfiniteFuture() for none); RESOURCE_EXHAUSTED when the engine refuses it.
  absl::StatusOr<SubmittedRequest> Submit(const v1::GenerateRequest& request,
                                          absl::Time deadline) const;

  // Passes `submitted`'s chunks, the final one included, to link.deliver until the final
  // one. Once the client is gone (deliver failed or link.gone()), the request is
  // cancelled in the engine (its KV caches are freed at the engine's next step) and the
  // rest of its output drained. Returns OK after an OK final chunk was delivered, the
  // error the request ended with (that final chunk is not delivered), or
  // link.gone_status() when the client went away.
  absl::Status Follow(const SubmittedRequest& submitted, const ClientLink& link) const;

  // Cancels a submitted request that will not be followed (its client is gone).
  void Cancel(const SubmittedRequest& submitted) const { engine_->Cancel(submitted.sequence); }

  const ServerLimits& limits() const { return limits_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  Engine* engine_;
  const Tokenizer* tokenizer_;
  const ServerLimits limits_;
  const ChatRenderer chat_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_REQUEST_SUBMITTER_H_
