#include "worker/verify_scenario.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace worker {
namespace testing {

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {

struct State {
  std::vector<int32_t> tokens;  // Prompt + committed.
  size_t prompt_size = 0;
  int cached = 0;
};

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
}

}  // namespace

absl::StatusOr<std::vector<SequenceTrace>> RunGreedyScenario(
    v1::Worker::Stub& stub, const std::vector<std::vector<int32_t>>& prompts,
    const std::vector<std::vector<int32_t>>& oracle, const ScenarioOptions& options) {
  const int n = static_cast<int>(prompts.size());
  std::vector<State> states(n);
  {
    v1::PrefillRequest request;
    for (int i = 0; i < n; ++i) {
      states[i].tokens = prompts[i];
      states[i].prompt_size = prompts[i].size();
      states[i].cached = static_cast<int>(prompts[i].size()) - 1;
      v1::PrefillSequence* s = request.add_sequences();
      s->set_sequence_id(options.base_id + i);
      s->mutable_tokens()->Assign(prompts[i].begin(), prompts[i].end() - 1);
    }
    grpc::ClientContext context;
    SetDeadline(context);
    v1::PrefillResponse response;
    absl::Status status = FromGrpc(stub.Prefill(&context, request, &response));
    if (!status.ok()) return status;
  }
  std::vector<SequenceTrace> traces(n);
  for (int step = 0; step < options.steps; ++step) {
    std::vector<std::vector<int>> batches;
    if (options.batched) {
      batches.emplace_back();
      for (int i = 0; i < n; ++i) batches.back().push_back(i);
    } else {
      for (int i = 0; i < n; ++i) batches.push_back({i});
    }
    for (const std::vector<int>& batch : batches) {
      v1::VerifyRequest request;
      for (int i : batch) {
        State& st = states[i];
        v1::VerifySequence* s = request.add_sequences();
        s->set_sequence_id(options.base_id + i);
        s->set_start_position(st.cached);
        s->mutable_tokens()->Assign(st.tokens.begin() + st.cached, st.tokens.end());
        const size_t generated = st.tokens.size() - st.prompt_size;
        const int corrupt = (step + i) % (options.k + 1);
        for (int j = 0; j < options.k; ++j) {
          const size_t at = generated + j;
          int32_t token = at < oracle[i].size() ? oracle[i][at] : 0;
          if (j == corrupt) token = (token + 1) % options.vocab_size;
          v1::ProposedToken* p = s->add_proposals();
          p->set_token(token);
          p->add_q_ids(token);
          p->add_q_probs(1.0f);
        }
        v1::SequenceSampling* sampling = s->mutable_sampling();
        sampling->set_rule(v1::ACCEPTANCE_RULE_GREEDY);
        sampling->set_top_p(1);
        sampling->set_return_logprobs(true);
        s->set_sample_index(static_cast<uint32_t>(generated));
      }
      grpc::ClientContext context;
      SetDeadline(context);
      v1::VerifyResponse response;
      absl::Status status = FromGrpc(stub.Verify(&context, request, &response));
      if (!status.ok()) return status;
      if (response.sequences_size() != static_cast<int>(batch.size())) {
        return absl::InternalError("verify answered a different number of sequences");
      }
      for (size_t b = 0; b < batch.size(); ++b) {
        const int i = batch[b];
        const v1::VerifiedSequence& out = response.sequences(b);
        traces[i].committed.emplace_back(out.committed().begin(), out.committed().end());
        traces[i].logprobs.emplace_back(out.logprobs().begin(), out.logprobs().end());
        traces[i].server_compute_ms.push_back(response.compute_ms());
        states[i].tokens.insert(states[i].tokens.end(), out.committed().begin(),
                                out.committed().end());
        states[i].cached = static_cast<int>(out.cached_length());
      }
    }
  }
  return traces;
}

}  // namespace testing
}  // namespace worker
}  // namespace tandem
