#include "tests/security/bad_requests.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem::security {
namespace {

template <typename Request, typename Response>
grpc::Status Call(grpc::Status (v1::Worker::Stub::*method)(grpc::ClientContext*, const Request&,
                                                           Response*),
                  v1::Worker::Stub* stub, grpc::ClientContext* ctx, const Request& request) {
  Response response;
  return (stub->*method)(ctx, request, &response);
}

}  // namespace

std::vector<PublicCase> PublicCases() {
  using R = v1::GenerateRequest;
  auto threshold = [](R& r) {
    r.mutable_sampling()->set_temperature(0.5f);
    r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_THRESHOLD);
  };
  return {
      {"valid request (control)", [](R&) {}, grpc::OK},
      {"request_id over 128 characters", [](R& r) { r.set_request_id(std::string(129, 'a')); },
       grpc::INVALID_ARGUMENT},
      {"request_id with a control byte", [](R& r) { r.set_request_id("id\x01"); },
       grpc::INVALID_ARGUMENT},
      {"no prompt", [](R& r) { r.clear_prompt(); }, grpc::INVALID_ARGUMENT},
      {"empty text", [](R& r) { r.set_text(""); }, grpc::INVALID_ARGUMENT},
      {"text over 1 MiB", [](R& r) { r.set_text(std::string((1 << 20) + 1, 'a')); },
       grpc::INVALID_ARGUMENT},
      {"text tokenising past the context",
       [](R& r) {
         std::string text;
         for (int i = 0; i < 3000; ++i) absl::StrAppend(&text, "x", i, " = ", i * 7, "\n");
         r.set_text(text);
       },
       grpc::INVALID_ARGUMENT},
      {"empty token_ids", [](R& r) { r.mutable_token_ids(); }, grpc::INVALID_ARGUMENT},
      {"negative token id", [](R& r) { r.mutable_token_ids()->add_ids(-1); },
       grpc::INVALID_ARGUMENT},
      {"token id = vocab size", [](R& r) { r.mutable_token_ids()->add_ids(kVocab); },
       grpc::INVALID_ARGUMENT},
      {"token_ids filling the context",
       [](R& r) {
         for (int i = 0; i < 2048; ++i) r.mutable_token_ids()->add_ids(5);
       },
       grpc::INVALID_ARGUMENT},
      {"max_new_tokens over the limit", [](R& r) { r.set_max_new_tokens(4097); },
       grpc::INVALID_ARGUMENT},
      {"nine stop strings",
       [](R& r) {
         for (int i = 0; i < 9; ++i) r.add_stop(absl::StrCat("s", i));
       },
       grpc::INVALID_ARGUMENT},
      {"empty stop string", [](R& r) { r.add_stop(""); }, grpc::INVALID_ARGUMENT},
      {"stop string over 256 bytes", [](R& r) { r.add_stop(std::string(257, 's')); },
       grpc::INVALID_ARGUMENT},
      {"negative temperature", [](R& r) { r.mutable_sampling()->set_temperature(-0.1f); },
       grpc::INVALID_ARGUMENT},
      {"temperature over 100", [](R& r) { r.mutable_sampling()->set_temperature(100.5f); },
       grpc::INVALID_ARGUMENT},
      {"NaN temperature", [](R& r) { r.mutable_sampling()->set_temperature(std::nanf("")); },
       grpc::INVALID_ARGUMENT},
      {"infinite temperature", [](R& r) { r.mutable_sampling()->set_temperature(INFINITY); },
       grpc::INVALID_ARGUMENT},
      {"negative top_k", [](R& r) { r.mutable_sampling()->set_top_k(-1); }, grpc::INVALID_ARGUMENT},
      {"top_k over the vocabulary", [](R& r) { r.mutable_sampling()->set_top_k(kVocab + 1); },
       grpc::INVALID_ARGUMENT},
      {"top_p zero", [](R& r) { r.mutable_sampling()->set_top_p(0); }, grpc::INVALID_ARGUMENT},
      {"top_p over one", [](R& r) { r.mutable_sampling()->set_top_p(1.01f); },
       grpc::INVALID_ARGUMENT},
      {"NaN top_p", [](R& r) { r.mutable_sampling()->set_top_p(std::nanf("")); },
       grpc::INVALID_ARGUMENT},
      {"unknown method",
       [](R& r) { r.mutable_speculation()->set_method(static_cast<v1::SpeculationMethod>(6)); },
       grpc::INVALID_ARGUMENT},
      {"unknown pipelining",
       [](R& r) { r.mutable_speculation()->set_pipelining(static_cast<v1::Pipelining>(3)); },
       grpc::INVALID_ARGUMENT},
      {"lookahead window zero",
       [](R& r) {
         r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_LOOKAHEAD);
         r.mutable_speculation()->mutable_lookahead()->set_window(0);
       },
       grpc::INVALID_ARGUMENT},
      {"lookahead over max_k",
       [](R& r) {
         r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_LOOKAHEAD);
         r.mutable_speculation()->mutable_lookahead()->set_window(64);
         r.mutable_speculation()->mutable_lookahead()->set_ngram(8);
       },
       grpc::INVALID_ARGUMENT},
      {"lookahead sizes with another method",
       [](R& r) {
         r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_PROMPT_LOOKUP);
         r.mutable_speculation()->mutable_lookahead()->set_ngram(3);
       },
       grpc::INVALID_ARGUMENT},
      {"negative K", [](R& r) { r.mutable_speculation()->set_num_speculative_tokens(-1); },
       grpc::INVALID_ARGUMENT},
      {"K over max_k", [](R& r) { r.mutable_speculation()->set_num_speculative_tokens(9); },
       grpc::INVALID_ARGUMENT},
      {"K with method none",
       [](R& r) {
         r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_NONE);
         r.mutable_speculation()->set_num_speculative_tokens(2);
       },
       grpc::INVALID_ARGUMENT},
      {"unknown acceptance rule",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(static_cast<v1::AcceptanceRule>(99));
       },
       grpc::INVALID_ARGUMENT},
      {"greedy rule with temperature > 0",
       [](R& r) {
         r.mutable_sampling()->set_temperature(0.7f);
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_GREEDY);
       },
       grpc::INVALID_ARGUMENT},
      {"alpha with the default rule", [](R& r) { r.mutable_speculation()->set_alpha(0.3f); },
       grpc::INVALID_ARGUMENT},
      {"theta_first with threshold",
       [&](R& r) {
         threshold(r);
         r.mutable_speculation()->set_theta_first(0.9f);
       },
       grpc::INVALID_ARGUMENT},
      {"epsilon with ratio",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_RATIO);
         r.mutable_speculation()->set_epsilon(0.1f);
       },
       grpc::INVALID_ARGUMENT},
      {"delta with position",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_POSITION);
         r.mutable_speculation()->set_delta(0.1f);
       },
       grpc::INVALID_ARGUMENT},
      {"threshold alpha = 1 (open interval)",
       [&](R& r) {
         threshold(r);
         r.mutable_speculation()->set_alpha(1.0f);
       },
       grpc::INVALID_ARGUMENT},
      {"ratio alpha = 0",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_RATIO);
         r.mutable_speculation()->set_alpha(0.0f);
       },
       grpc::INVALID_ARGUMENT},
      {"theta_first = 0",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_POSITION);
         r.mutable_speculation()->set_theta_first(0.0f);
       },
       grpc::INVALID_ARGUMENT},
      {"theta_last over one",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_POSITION);
         r.mutable_speculation()->set_theta_last(1.5f);
       },
       grpc::INVALID_ARGUMENT},
      {"epsilon = 0",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_TYPICAL);
         r.mutable_speculation()->set_epsilon(0.0f);
       },
       grpc::INVALID_ARGUMENT},
      {"NaN delta",
       [](R& r) {
         r.mutable_speculation()->set_acceptance_rule(v1::ACCEPTANCE_RULE_TYPICAL);
         r.mutable_speculation()->set_delta(std::nanf(""));
       },
       grpc::INVALID_ARGUMENT},
      {"more KV than the target holds", [](R& r) { r.set_max_new_tokens(2000); },
       grpc::RESOURCE_EXHAUSTED},
  };
}

v1::ProposedToken Proposal(int token) {
  v1::ProposedToken p;
  p.set_token(token);
  p.add_q_ids(token);
  p.add_q_probs(1.0f);
  return p;
}

v1::VerifyRequest VerifyOf(uint64_t id, uint32_t start, std::vector<int> tokens,
                           std::vector<v1::ProposedToken> proposals) {
  v1::VerifyRequest r;
  v1::VerifySequence* s = r.add_sequences();
  s->set_sequence_id(id);
  s->set_start_position(start);
  for (int t : tokens) s->add_tokens(t);
  for (auto& p : proposals) *s->add_proposals() = p;
  s->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_GREEDY);
  s->mutable_sampling()->set_top_p(1.0f);
  return r;
}

v1::DraftRequest DraftOf(uint64_t id, uint32_t start, std::vector<int> tokens, int k) {
  v1::DraftRequest r;
  v1::DraftSequence* s = r.add_sequences();
  s->set_sequence_id(id);
  s->set_start_position(start);
  for (int t : tokens) s->add_tokens(t);
  s->set_num_draft_tokens(k);
  s->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_GREEDY);
  s->mutable_sampling()->set_top_p(1.0f);
  return r;
}

v1::PrefillRequest PrefillOf(uint64_t id, uint32_t start, int count, int token) {
  v1::PrefillRequest r;
  v1::PrefillSequence* s = r.add_sequences();
  s->set_sequence_id(id);
  s->set_start_position(start);
  for (int i = 0; i < count; ++i) s->add_tokens(token);
  return r;
}

WorkerApiCases WorkerCases() {
  using S = v1::Worker::Stub;
  using C = grpc::ClientContext;
  auto V = [](v1::VerifyRequest r) {
    return [r](S* s, C* c) { return Call(&S::Verify, s, c, r); };
  };
  auto D = [](v1::DraftRequest r) { return [r](S* s, C* c) { return Call(&S::Draft, s, c, r); }; };
  auto P = [](v1::PrefillRequest r) {
    return [r](S* s, C* c) { return Call(&S::Prefill, s, c, r); };
  };
  // Sequence 500 exists on both workers with 4 cached tokens (set up below).
  v1::VerifyRequest two_ids = VerifyOf(600, 0, {1});
  *two_ids.add_sequences() = two_ids.sequences(0);
  v1::ProposedToken mismatched = Proposal(3);
  mismatched.add_q_probs(0.0f);
  v1::ProposedToken bad_sum = Proposal(3);
  bad_sum.set_q_probs(0, 0.5f);
  v1::ProposedToken outside = Proposal(3);
  outside.set_q_ids(0, 4);
  v1::VerifyRequest bad_parents = VerifyOf(601, 0, {1}, {Proposal(3), Proposal(4)});
  bad_parents.mutable_sequences(0)->add_proposal_parents(-1);
  bad_parents.mutable_sequences(0)->add_proposal_parents(1);
  v1::VerifyRequest short_parents = VerifyOf(601, 0, {1}, {Proposal(3), Proposal(4)});
  short_parents.mutable_sequences(0)->add_proposal_parents(-1);
  // Trees: two siblings under rejection sampling (point masses: each q leaves out the
  // other sibling's token) are verified; siblings with one token, and a later sibling
  // whose q covers the earlier sibling's token, are refused.
  const auto tree = [](uint64_t id, std::vector<v1::ProposedToken> nodes,
                       std::vector<int> parents) {
    v1::VerifyRequest r = VerifyOf(id, 0, {1}, nodes);
    for (int p : parents) r.mutable_sequences(0)->add_proposal_parents(p);
    r.mutable_sequences(0)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
    r.mutable_sequences(0)->mutable_sampling()->set_temperature(1.0f);
    return r;
  };
  const v1::VerifyRequest tree_rejection = tree(602, {Proposal(3), Proposal(4)}, {-1, -1});
  const v1::VerifyRequest twin_siblings =
      tree(614, {Proposal(3), Proposal(5), Proposal(5)}, {-1, 0, 0});
  v1::ProposedToken covers_3 = Proposal(4);
  covers_3.set_q_probs(0, 0.5f);
  covers_3.add_q_ids(3);
  covers_3.add_q_probs(0.5f);
  const v1::VerifyRequest iid_siblings = tree(615, {Proposal(3), covers_3}, {-1, -1});
  v1::VerifyRequest bad_sampling = VerifyOf(603, 0, {1});
  bad_sampling.mutable_sequences(0)->mutable_sampling()->set_temperature(-1.0f);
  v1::DraftRequest top_k_257 = DraftOf(604, 0, {1}, 2);
  top_k_257.mutable_sequences(0)->set_proposal_top_k(257);
  v1::TruncateRequest truncate_up;
  auto* item = truncate_up.add_items();
  item->set_sequence_id(500);
  item->set_length(100);
  // Sequences of 1000 tokens (under max_batch_tokens) until the 2 MiB cache is full.
  auto kv_hog = [](S* s, C* c) {
    grpc::Status status;
    for (int i = 0; i < 10 && status.ok(); ++i) {
      C ctx;
      ctx.set_deadline(c->deadline());
      status = Call(&S::Prefill, s, &ctx, PrefillOf(700 + i, 0, 1000));
    }
    return status;
  };

  const std::vector<WorkerCase> target_cases = {
      {"Prefill, no sequences", P(v1::PrefillRequest()), grpc::INVALID_ARGUMENT},
      {"Verify, a sequence id twice", V(two_ids), grpc::INVALID_ARGUMENT},
      {"Verify, no tokens", V(VerifyOf(605, 0, {})), grpc::INVALID_ARGUMENT},
      {"Verify, token outside the vocabulary", V(VerifyOf(605, 0, {kVocab})),
       grpc::INVALID_ARGUMENT},
      {"Verify, start past the cached length", V(VerifyOf(500, 9, {1})), grpc::INVALID_ARGUMENT},
      {"Prefill, one token (control)", P(PrefillOf(606, 0, 1)), grpc::OK},
      {"Prefill, past the context", P(PrefillOf(606, 1, 2048)), grpc::INVALID_ARGUMENT},
      {"Verify, more proposals than K",
       V(VerifyOf(607, 0, {1}, std::vector<v1::ProposedToken>(9, Proposal(3)))),
       grpc::INVALID_ARGUMENT},
      {"Verify, q_ids and q_probs of different lengths", V(VerifyOf(607, 0, {1}, {mismatched})),
       grpc::INVALID_ARGUMENT},
      {"Verify, q not summing to 1", V(VerifyOf(607, 0, {1}, {bad_sum})), grpc::INVALID_ARGUMENT},
      {"Verify, token outside q's support", V(VerifyOf(607, 0, {1}, {outside})),
       grpc::INVALID_ARGUMENT},
      {"Verify, parent index not before the proposal", V(bad_parents), grpc::INVALID_ARGUMENT},
      {"Verify, parents of the wrong length", V(short_parents), grpc::INVALID_ARGUMENT},
      {"Verify, tree under rejection sampling", V(tree_rejection), grpc::OK},
      {"Verify, tree with two siblings of one token", V(twin_siblings), grpc::INVALID_ARGUMENT},
      {"Verify, tree sibling q covering an earlier sibling", V(iid_siblings),
       grpc::INVALID_ARGUMENT},
      {"Verify, bad sampling", V(bad_sampling), grpc::INVALID_ARGUMENT},
      {"Truncate, longer than cached",
       [truncate_up](S* s, C* c) { return Call(&S::Truncate, s, c, truncate_up); },
       grpc::INVALID_ARGUMENT},
      {"Verify, unknown sequence at a later position", V(VerifyOf(608, 5, {1})), grpc::NOT_FOUND},
      {"Prefill, over max_batch_tokens", P(PrefillOf(609, 0, 1025)), grpc::RESOURCE_EXHAUSTED},
      {"Prefill, over the KV cache", kv_hog, grpc::RESOURCE_EXHAUSTED},
      {"Draft on the target", D(DraftOf(610, 0, {1}, 2)), grpc::FAILED_PRECONDITION},
      {"Release, unknown ids (idempotent)",
       [](S* s, C* c) {
         v1::ReleaseRequest r;
         r.add_sequence_ids(99999);
         return Call(&S::Release, s, c, r);
       },
       grpc::OK},
  };
  const std::vector<WorkerCase> draft_cases = {
      {"Draft, K = 0", D(DraftOf(611, 0, {1}, 0)), grpc::INVALID_ARGUMENT},
      {"Draft, K over the maximum", D(DraftOf(611, 0, {1}, 9)), grpc::INVALID_ARGUMENT},
      {"Draft, proposal_top_k 257", D(top_k_257), grpc::INVALID_ARGUMENT},
      {"Draft, unknown sequence at a later position", D(DraftOf(612, 3, {1}, 2)), grpc::NOT_FOUND},
      {"Verify on the draft", V(VerifyOf(613, 0, {1})), grpc::FAILED_PRECONDITION},
  };
  return {target_cases, draft_cases};
}

}  // namespace tandem::security
