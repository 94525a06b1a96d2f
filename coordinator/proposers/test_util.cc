#include "coordinator/proposers/test_util.h"

namespace tandem::coordinator::testing {

const ProposerRegistry& TestRegistry() {
  static const ProposerRegistry* registry = [] {
    ProposerConfig config;
    config.draft_worker = true;
    config.target_methods = {v1::SPECULATION_METHOD_MEDUSA};
    return new ProposerRegistry(config);
  }();
  return *registry;
}

std::unique_ptr<Sequence> MakeSequence(uint64_t id, const ValidatedRequest& request,
                                       std::vector<int32_t> prompt, int max_new_tokens,
                                       const Tokenizer* tokenizer,
                                       std::shared_ptr<OutputChannel> output) {
  if (output == nullptr) output = std::make_shared<OutputChannel>();
  auto s = std::make_unique<Sequence>(id, request, std::move(prompt), max_new_tokens, tokenizer,
                                      /*stop_token_ids=*/std::vector<int>{2},
                                      spec::ControllerConfig(), absl::Now(), std::move(output));
  s->AttachProposers(TestRegistry().ChainFor(request.speculation.method));
  return s;
}

int SlotOf(const Sequence& s, v1::SpeculationMethod method) {
  for (int slot = 0; slot < s.chain_size(); ++slot) {
    if (s.proposer(slot).method() == method) return slot;
  }
  return -1;
}

void GiveDraftCandidates(Sequence* s, const std::vector<int32_t>& tokens) {
  const int slot = SlotOf(*s, v1::SPECULATION_METHOD_DRAFT);
  if (slot < 0) return;
  s->proposer(slot).Reset(*s, s->proposer_state(slot));
  v1::DraftSequence request;
  request.set_sequence_id(s->id());
  request.mutable_tokens()->Add(s->tokens().begin(), s->tokens().end());
  request.set_num_draft_tokens(tokens.size());
  v1::DraftedSequence response;
  response.set_sequence_id(s->id());
  for (int32_t t : tokens) *response.add_proposals() = PointMassProposal(t);
  std::optional<Candidates> c =
      s->proposer(slot).OnDrafted(*s, s->proposer_state(slot), request, response, false);
  if (c.has_value()) s->candidates = *std::move(c);
}

}  // namespace tandem::coordinator::testing
