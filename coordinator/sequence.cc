#include "coordinator/sequence.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"

namespace tandem::coordinator {
namespace {

float Ms(absl::Duration d) { return static_cast<float>(absl::ToDoubleMilliseconds(d)); }

}  // namespace

Sequence::Sequence(uint64_t id, ValidatedRequest request, std::vector<int32_t> prompt,
                   int max_new_tokens, const Tokenizer* tokenizer, std::vector<int> stop_token_ids,
                   const spec::ControllerConfig& controller, absl::Time arrival,
                   std::shared_ptr<OutputChannel> output)
    : id_(id),
      request_(std::move(request)),
      tokenizer_(tokenizer),
      stop_token_ids_(std::move(stop_token_ids)),
      prompt_length_(static_cast<int>(prompt.size())),
      max_new_tokens_(max_new_tokens),
      tokens_(std::move(prompt)),
      controller_(controller),
      detokenizer_(tokenizer, /*after_text=*/true),
      stop_matcher_(request_.stop),
      output_(std::move(output)) {
  stats_.arrival = arrival;
}

void Sequence::AttachProposers(const std::vector<const Proposer*>& chain,
                               const std::vector<ServerAcceptance>& server_acceptance) {
  chain_.clear();
  for (size_t i = 0; i < chain.size(); ++i) {
    chain_.push_back(
        {chain[i], chain[i]->NewState(*this),
         i < server_acceptance.size() ? server_acceptance[i] : ServerAcceptance{nullptr, nullptr}});
  }
}

void Sequence::AccountStep(const Candidates& verified, int proposed, int accepted) {
  int used = -1;
  for (int slot = 0; slot < chain_size() && proposed > 0; ++slot) {
    if (chain_[slot].proposer->method() == verified.method) used = slot;
  }
  const bool tree = verified.tree_option;
  if (chain_size() > 0) {
    controller_.Observe(planned_.choice, used < 0 ? -1 : ControllerOptionOf(used, tree), proposed,
                        accepted);
  }
  if (used >= 0 && chain_[used].server_acceptance[tree] != nullptr) {
    chain_[used].server_acceptance[tree]->Observe(proposed, accepted);
  }
  if (used >= 0) {
    double& ratio = chain_[used].nodes_per_depth[tree];
    ratio = 0.9 * ratio + 0.1 * verified.size() / proposed;
  }
  if (used >= 0 && tree) stats_.tree_steps += 1;
  if (static_cast<int>(stats_.steps_by_k.size()) <= proposed) {
    stats_.steps_by_k.resize(proposed + 1, 0);
  }
  stats_.steps_by_k[proposed] += 1;
  if (planned_.from_controller) {
    stats_.predicted_speedup_sum += planned_.choice.speedup;
    stats_.predicted_steps += 1;
  }
  if (proposed > 0 && verified.predrafted) stats_.predrafted_steps += 1;
  if (proposed > 0) {
    const bool probe = planned_.from_controller && planned_.choice.probe;
    stats_.probe_steps += probe;
    last_step_decision_ = probe ? "probe" : "speculate";
    return;
  }
  last_step_decision_ = planned_.off_reason != nullptr ? planned_.off_reason : "no_candidates";
  stats_.off_steps[last_step_decision_] += 1;
}

void Sequence::OnVerified(const v1::VerifiedSequence& result, int proposed, absl::Time now) {
  if (finished_) return;
  const int accepted = static_cast<int>(result.num_accepted());
  const int generated_before = generated();
  const Candidates verified = std::move(candidates);
  candidates.Clear();
  AccountStep(verified, proposed, accepted);

  OutputChunk chunk;
  const v1::FinishReason reason = CommitTokens(result, &chunk);
  if (finished_) return;  // Failed (detokenisation).
  // Accepted proposals count only as far as they reached the output (a step that ends
  // at EOS, a stop string or max_new_tokens commits fewer tokens than it accepted).
  stats_.target_steps += 1;
  stats_.draft_tokens_proposed += proposed;
  stats_.draft_tokens_accepted += std::min(accepted, generated() - generated_before);
  if (proposed > 0) stats_.speculative_steps += 1;
  if (stats_.first_token == absl::Time() && generated() > 0) stats_.first_token = now;
  stats_.last_token = now;

  // Cache bookkeeping: the target holds everything but the final committed token.
  target_cached = std::min<int>(result.cached_length(), static_cast<int>(tokens_.size()) - 1);
  // Every proposer sees the step; the first to have the next candidates supplies them.
  // Candidates past the last token that may still be generated are useless (and would
  // be counted as proposed): keep at most remaining() - 1.
  for (ProposerSlot& slot : chain_) {
    std::optional<Candidates> next = slot.proposer->OnVerified(*this, *slot.state, verified, result,
                                                               generated() - generated_before);
    if (next.has_value() && candidates.empty() && reason == v1::FINISH_REASON_UNSPECIFIED) {
      candidates = *std::move(next);
      candidates.TruncateDepth(std::max(0, remaining() - 1));
    }
  }

  if (reason != v1::FINISH_REASON_UNSPECIFIED) {
    Finish(reason, now, std::move(chunk), /*text_done=*/reason == v1::FINISH_REASON_STOP);
    return;
  }
  if (!chunk.text.empty() || !chunk.token_ids.empty()) output_->Push(std::move(chunk));
}

v1::FinishReason Sequence::CommitTokens(const v1::VerifiedSequence& result, OutputChunk* chunk) {
  // Token by token, exactly as target-only decoding commits them: the ids, logprobs
  // and counts end with the token that ends the text (EOS, the length limit, or the
  // token that completed a stop string), never later.
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  for (int i = 0; i < result.committed_size() && reason == v1::FINISH_REASON_UNSPECIFIED; ++i) {
    if (remaining() <= 0) return v1::FINISH_REASON_LENGTH;
    const int32_t token = result.committed(i);
    tokens_.push_back(token);
    if (request_.return_token_ids) chunk->token_ids.push_back(token);
    if (request_.return_logprobs && i < result.logprobs_size()) {
      chunk->logprobs.push_back(result.logprobs(i));
    }
    if (!request_.ignore_eos && absl::c_linear_search(stop_token_ids_, token)) {
      return v1::FINISH_REASON_EOS;
    }
    absl::StatusOr<std::string> text = detokenizer_.Add(token);
    if (!text.ok()) {
      Fail(absl::InternalError(absl::StrCat("detokenisation failed: ", text.status().message())),
           absl::Now());
      return v1::FINISH_REASON_UNSPECIFIED;
    }
    StopMatcher::Result stop = stop_matcher_.Feed(*text);
    chunk->text += stop.emit;
    if (stop.stopped) reason = v1::FINISH_REASON_STOP;
  }
  if (reason == v1::FINISH_REASON_UNSPECIFIED && remaining() <= 0) {
    reason = v1::FINISH_REASON_LENGTH;
  }
  return reason;
}

void Sequence::Finish(v1::FinishReason reason, absl::Time now, OutputChunk chunk, bool text_done) {
  if (!text_done) {
    std::string rest = detokenizer_.Flush();
    StopMatcher::Result stop = stop_matcher_.Feed(rest);
    chunk.text += stop.emit;
    if (stop.stopped) {
      reason = v1::FINISH_REASON_STOP;
    } else {
      chunk.text += stop_matcher_.Flush();
    }
  }
  finished_ = true;
  chunk.final = true;
  chunk.finish_reason = reason;
  chunk.status = absl::OkStatus();
  chunk.stats = PublicStats(now);
  output_->Push(std::move(chunk));
}

void Sequence::Fail(const absl::Status& status, absl::Time now) {
  if (finished_) return;
  finished_ = true;
  OutputChunk chunk;
  chunk.final = true;
  chunk.status = status.ok() ? absl::CancelledError("request cancelled") : status;
  chunk.stats = PublicStats(now);
  output_->Push(std::move(chunk));
}

v1::RequestStats Sequence::PublicStats(absl::Time now) const {
  v1::RequestStats s;
  s.set_prompt_tokens(prompt_length_);
  s.set_generated_tokens(generated());
  s.set_draft_tokens_proposed(stats_.draft_tokens_proposed);
  s.set_draft_tokens_accepted(stats_.draft_tokens_accepted);
  s.set_acceptance_rate(stats_.draft_tokens_proposed > 0
                            ? float(stats_.draft_tokens_accepted) / stats_.draft_tokens_proposed
                            : 0.0f);
  s.set_mean_accepted_length(stats_.target_steps > 0 ? float(generated()) / stats_.target_steps
                                                     : 0.0f);
  s.set_target_steps(stats_.target_steps);
  s.set_speculative_steps(stats_.speculative_steps);
  s.set_fallback_steps(stats_.fallback_steps);
  if (stats_.first_token != absl::Time()) {
    s.set_time_to_first_token_ms(Ms(stats_.first_token - stats_.arrival));
    if (generated() > 1) {
      s.set_time_per_output_token_ms(Ms(stats_.last_token - stats_.first_token) /
                                     (generated() - 1));
    }
  }
  if (stats_.admitted != absl::Time()) s.set_queue_time_ms(Ms(stats_.admitted - stats_.arrival));
  s.set_total_time_ms(Ms(now - stats_.arrival));
  v1::SpeculationMethod method = request_.speculation.method;
  if (method == v1::SPECULATION_METHOD_AUTO) {
    // The method that verified most steps (ties: the one earlier in the chain).
    method = v1::SPECULATION_METHOD_NONE;
    int most = 0;
    for (const ProposerSlot& slot : chain_) {
      auto it = stats_.steps_by_method.find(slot.proposer->method());
      if (it != stats_.steps_by_method.end() && it->second > most) {
        most = it->second;
        method = it->first;
      }
    }
  }
  s.set_method(method);
  for (const auto& [reason, steps] : stats_.off_steps) {
    (*s.mutable_speculation_off_steps())[reason] = steps;
  }
  s.mutable_steps_by_k()->Add(stats_.steps_by_k.begin(), stats_.steps_by_k.end());
  s.set_probe_steps(stats_.probe_steps);
  s.set_predrafted_steps(stats_.predrafted_steps);
  s.set_tree_steps(stats_.tree_steps);
  s.set_predicted_speedup(
      stats_.predicted_steps > 0
          ? static_cast<float>(stats_.predicted_speedup_sum / stats_.predicted_steps)
          : 0.0f);
  s.set_seed(request_.sampling.seed);
  return s;
}

}  // namespace tandem::coordinator
