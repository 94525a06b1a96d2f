#include "coordinator/request_submitter.h"

#include <utility>
#include <vector>

namespace tandem::coordinator {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

}  // namespace

RequestSubmitter::RequestSubmitter(Engine* engine, const Tokenizer* tokenizer, ServerLimits limits,
                                   ChatRenderer chat)
    : engine_(engine), tokenizer_(tokenizer), limits_(std::move(limits)), chat_(std::move(chat)) {}

absl::StatusOr<SubmittedRequest> RequestSubmitter::Submit(const v1::GenerateRequest& request,
                                                          absl::Time deadline) const {
  if (request.has_chat()) {
    const int bos = tokenizer_->bos_id();
    absl::StatusOr<std::string> text =
        RenderChatPrompt(request.chat(), chat_, bos >= 0 ? tokenizer_->IdToPiece(bos) : "");
    if (!text.ok()) return text.status();
    v1::GenerateRequest rendered = request;
    rendered.set_text(*std::move(text));
    return Submit(rendered, deadline);
  }
  absl::StatusOr<ValidatedRequest> valid = ValidateRequest(request, limits_);
  if (!valid.ok()) return valid.status();
  SubmittedRequest out;
  out.request_id = valid->request_id;
  std::vector<int32_t> prompt;
  if (valid->prompt_is_text) {
    absl::StatusOr<std::vector<int>> ids = tokenizer_->Encode(valid->prompt_text, true);
    if (!ids.ok()) return ids.status();
    prompt.assign(ids->begin(), ids->end());
  } else {
    prompt = valid->prompt_token_ids;
  }
  out.prompt_tokens = static_cast<int>(prompt.size());
  absl::StatusOr<int> max_new =
      CheckPromptLength(out.prompt_tokens, valid->max_new_tokens, limits_);
  if (!max_new.ok()) return max_new.status();
  out.channel = std::make_shared<OutputChannel>();
  absl::StatusOr<std::shared_ptr<Sequence>> seq =
      engine_->Submit(*std::move(valid), std::move(prompt), *max_new, deadline, out.channel);
  if (!seq.ok()) return seq.status();
  out.sequence = *std::move(seq);
  return out;
}

absl::Status RequestSubmitter::Follow(const SubmittedRequest& submitted,
                                      const ClientLink& link) const {
  absl::Status gone;  // Set once the client went away.
  auto client_left = [&] {
    gone = link.gone_status();
    engine_->Cancel(submitted.sequence);
  };
  for (;;) {
    for (OutputChunk& chunk : submitted.channel->Pop(kPollInterval)) {
      if (chunk.final && !gone.ok()) return gone;
      if (chunk.final && !chunk.status.ok()) return chunk.status;
      if (gone.ok() && !link.deliver(chunk)) client_left();
      if (chunk.final) return gone;
    }
    if (gone.ok() && link.gone()) client_left();
  }
}

}  // namespace tandem::coordinator
