// Writes the seed corpora of the fuzz targets (fuzz/corpus/...): hand-picked valid and
// invalid messages that start the fuzzers near the interesting code paths.
//   bazel run //fuzz:write_seeds -- $PWD/fuzz/corpus
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "tandem/v1/tandem.pb.h"
#include "tandem/v1/worker.pb.h"

namespace {

std::string g_root;
int g_count = 0;

void Write(const std::string& corpus, const std::string& name, const std::string& bytes) {
  const std::string dir = g_root + "/" + corpus;
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
  ++g_count;
}

void Request(const std::string& name, const tandem::v1::GenerateRequest& r) {
  Write("request_validation", name, r.SerializeAsString());
}

void RequestSeeds() {
  using tandem::v1::GenerateRequest;
  GenerateRequest base;
  base.set_text("def add(a, b):\n    return");
  base.set_max_new_tokens(16);
  Request("text", base);
  GenerateRequest r = base;
  r.set_request_id("client-42");
  r.add_stop("\n\n");
  r.add_stop("def ");
  r.set_return_token_ids(true);
  r.set_return_logprobs(true);
  r.set_ignore_eos(true);
  Request("stops_and_flags", r);
  r = base;
  r.mutable_token_ids()->add_ids(1);
  r.mutable_token_ids()->add_ids(500);
  r.mutable_token_ids()->add_ids(2047);
  Request("token_ids", r);
  r = base;
  r.mutable_sampling()->set_temperature(0.8f);
  r.mutable_sampling()->set_top_k(40);
  r.mutable_sampling()->set_top_p(0.9f);
  r.mutable_sampling()->set_seed(7);
  Request("sampling", r);
  const struct {
    const char* name;
    tandem::v1::AcceptanceRule rule;
    float a, b;
  } rules[] = {{"rule_threshold", tandem::v1::ACCEPTANCE_RULE_THRESHOLD, 0.3f, 0},
               {"rule_ratio", tandem::v1::ACCEPTANCE_RULE_RATIO, 0.5f, 0},
               {"rule_position", tandem::v1::ACCEPTANCE_RULE_POSITION, 0.95f, 0.7f},
               {"rule_typical", tandem::v1::ACCEPTANCE_RULE_TYPICAL, 0.09f, 0.3f},
               {"rule_rejection", tandem::v1::ACCEPTANCE_RULE_REJECTION, 0, 0},
               {"rule_coupled", tandem::v1::ACCEPTANCE_RULE_COUPLED, 0, 0}};
  for (const auto& rule : rules) {
    r = base;
    r.mutable_sampling()->set_temperature(1.0f);
    auto* sp = r.mutable_speculation();
    sp->set_method(tandem::v1::SPECULATION_METHOD_DRAFT);
    sp->set_num_speculative_tokens(4);
    sp->set_acceptance_rule(rule.rule);
    sp->set_pipelining(tandem::v1::PIPELINING_OFF);
    switch (rule.rule) {
      case tandem::v1::ACCEPTANCE_RULE_THRESHOLD:
      case tandem::v1::ACCEPTANCE_RULE_RATIO:
        sp->set_alpha(rule.a);
        break;
      case tandem::v1::ACCEPTANCE_RULE_POSITION:
        sp->set_theta_first(rule.a);
        sp->set_theta_last(rule.b);
        break;
      case tandem::v1::ACCEPTANCE_RULE_TYPICAL:
        sp->set_epsilon(rule.a);
        sp->set_delta(rule.b);
        break;
      case tandem::v1::ACCEPTANCE_RULE_COUPLED:
        // Coupled is seed-keyed: with the seed it is also the default rule.
        r.mutable_sampling()->set_seed(11);
        break;
      default:
        break;
    }
    Request(rule.name, r);
  }
  r = base;
  r.mutable_speculation()->set_method(tandem::v1::SPECULATION_METHOD_PROMPT_LOOKUP);
  r.mutable_speculation()->set_num_speculative_tokens(0);
  Request("prompt_lookup_k0", r);
  r = base;
  r.mutable_speculation()->set_method(tandem::v1::SPECULATION_METHOD_MEDUSA);
  Request("medusa", r);
  r = base;
  r.mutable_sampling()->set_temperature(std::nanf(""));
  Request("nan_temperature", r);
  r = base;
  r.set_text("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80");
  Request("unicode", r);
  r = base;
  r.set_request_id(std::string(130, 'x'));
  Request("long_id", r);
  Request("empty", GenerateRequest());
}

void Worker(const std::string& name, char kind, const google::protobuf::Message& m) {
  Write("worker_request", name, std::string(1, kind) + m.SerializeAsString());
}

tandem::v1::ProposedToken Proposal(int token, bool sparse) {
  tandem::v1::ProposedToken p;
  p.set_token(token);
  p.add_q_ids(token);
  if (sparse) {
    p.add_q_probs(0.75f);
    p.add_q_ids(token + 1);
    p.add_q_probs(0.25f);
  } else {
    p.add_q_probs(1.0f);
  }
  return p;
}

void WorkerSeeds() {
  tandem::v1::PrefillRequest prefill;
  auto* p = prefill.add_sequences();
  p->set_sequence_id(9);
  for (int t : {1, 100, 200, 300}) p->add_tokens(t);
  auto* q = prefill.add_sequences();
  q->set_sequence_id(1);
  q->set_start_position(10);
  q->add_tokens(5);
  Worker("prefill", 0, prefill);

  tandem::v1::DraftRequest draft;
  auto* d = draft.add_sequences();
  d->set_sequence_id(1);
  d->set_start_position(8);
  d->add_tokens(3);
  d->add_tokens(4);
  d->set_num_draft_tokens(4);
  d->set_proposal_top_k(32);
  d->mutable_sampling()->set_rule(tandem::v1::ACCEPTANCE_RULE_GREEDY);
  Worker("draft", 1, draft);
  d->mutable_sampling()->set_temperature(0.7f);
  d->mutable_sampling()->set_top_p(0.9f);
  d->mutable_sampling()->set_rule(tandem::v1::ACCEPTANCE_RULE_REJECTION);
  Worker("draft_sampling", 1, draft);

  tandem::v1::VerifyRequest verify;
  auto* v = verify.add_sequences();
  v->set_sequence_id(1);
  v->set_start_position(9);
  v->add_tokens(7);
  *v->add_proposals() = Proposal(10, false);
  *v->add_proposals() = Proposal(11, false);
  v->mutable_sampling()->set_rule(tandem::v1::ACCEPTANCE_RULE_GREEDY);
  v->set_sample_index(3);
  Worker("verify_greedy", 2, verify);
  v->clear_proposals();
  *v->add_proposals() = Proposal(10, true);
  *v->add_proposals() = Proposal(20, true);
  v->mutable_sampling()->set_temperature(1.0f);
  v->mutable_sampling()->set_rule(tandem::v1::ACCEPTANCE_RULE_REJECTION);
  v->mutable_sampling()->set_return_logprobs(true);
  Worker("verify_rejection", 2, verify);
  v->mutable_sampling()->set_rule(tandem::v1::ACCEPTANCE_RULE_TYPICAL);
  v->mutable_sampling()->set_epsilon(0.09f);
  v->mutable_sampling()->set_delta(0.3f);
  v->add_proposal_parents(-1);
  v->add_proposal_parents(-1);
  Worker("verify_tree_typical", 2, verify);
  v->clear_proposal_parents();
  v->mutable_sampling()->clear_epsilon();
  v->mutable_sampling()->clear_delta();
  v->mutable_sampling()->set_rule(tandem::v1::ACCEPTANCE_RULE_COUPLED);
  v->mutable_sampling()->set_seed(11);
  Worker("verify_coupled", 2, verify);
  tandem::v1::VerifyRequest plain;
  auto* s = plain.add_sequences();
  s->set_sequence_id(2);
  s->add_tokens(1);
  s->mutable_sampling()->set_rule(tandem::v1::ACCEPTANCE_RULE_GREEDY);
  Worker("verify_decode", 2, plain);

  tandem::v1::TruncateRequest truncate;
  auto* item = truncate.add_items();
  item->set_sequence_id(3);
  item->set_length(100);
  Worker("truncate", 3, truncate);
}

void TokenizerSeeds() {
  Write("tokenizer", "code", "def fibonacci(n):\n    if n < 2:\n        return n\n");
  Write("tokenizer", "spaces", "  leading and trailing  \t\n");
  Write("tokenizer", "unicode",
        "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xe2\x82\xac");
  Write("tokenizer", "invalid_utf8", "ok \xc3\x28 \xed\xa0\x80 \xff\xfe");
  Write("tokenizer", "controls", std::string("\0\x01\x1b[0m<s></s><0x0A>", 18));
  Write("tokenizer", "one_byte", "x");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_seeds CORPUS_ROOT\n");
    return 2;
  }
  g_root = argv[1];
  mkdir(g_root.c_str(), 0755);
  RequestSeeds();
  WorkerSeeds();
  TokenizerSeeds();
  std::printf("wrote %d seed files under %s\n", g_count, g_root.c_str());
  return 0;
}
