// Round trips of the Tandem protocols: every field survives serialisation, optional
// fields keep "unset" apart from zero, and the oneof prompt keeps one alternative.
#include <gtest/gtest.h>

#include <string>

#include "tandem/v1/rendezvous.pb.h"
#include "tandem/v1/tandem.pb.h"
#include "tandem/v1/worker.pb.h"

namespace tandem::v1 {
namespace {

template <typename T>
T RoundTrip(const T& in) {
  std::string wire;
  EXPECT_TRUE(in.SerializeToString(&wire));
  T out;
  EXPECT_TRUE(out.ParseFromString(wire));
  return out;
}

TEST(ProtoTest, GenerateRequestRoundTrip) {
  GenerateRequest req;
  req.set_request_id("req-1");
  req.set_text("def fib(n):\n");
  req.set_max_new_tokens(64);
  req.add_stop("\n\n");
  req.mutable_sampling()->set_temperature(0.7f);
  req.mutable_sampling()->set_top_k(40);
  req.mutable_sampling()->set_top_p(0.9f);
  req.mutable_sampling()->set_seed(1234);
  req.mutable_speculation()->set_method(SPECULATION_METHOD_DRAFT);
  req.mutable_speculation()->set_num_speculative_tokens(4);
  req.mutable_speculation()->set_acceptance_rule(ACCEPTANCE_RULE_POSITION);
  req.mutable_speculation()->set_theta_first(0.95f);
  req.mutable_speculation()->set_theta_last(0.7f);
  req.set_return_token_ids(true);

  GenerateRequest out = RoundTrip(req);
  EXPECT_EQ(out.request_id(), "req-1");
  EXPECT_EQ(out.prompt_case(), GenerateRequest::kText);
  EXPECT_EQ(out.text(), "def fib(n):\n");
  EXPECT_EQ(out.max_new_tokens(), 64u);
  ASSERT_EQ(out.stop_size(), 1);
  EXPECT_EQ(out.stop(0), "\n\n");
  EXPECT_FLOAT_EQ(out.sampling().temperature(), 0.7f);
  EXPECT_EQ(out.sampling().top_k(), 40);
  EXPECT_TRUE(out.sampling().has_top_p());
  EXPECT_FLOAT_EQ(out.sampling().top_p(), 0.9f);
  EXPECT_EQ(out.sampling().seed(), 1234u);
  EXPECT_EQ(out.speculation().method(), SPECULATION_METHOD_DRAFT);
  EXPECT_EQ(out.speculation().num_speculative_tokens(), 4);
  EXPECT_EQ(out.speculation().acceptance_rule(), ACCEPTANCE_RULE_POSITION);
  EXPECT_FLOAT_EQ(out.speculation().theta_last(), 0.7f);
  EXPECT_FALSE(out.speculation().has_alpha());
  EXPECT_TRUE(out.return_token_ids());
  EXPECT_FALSE(out.ignore_eos());
}

TEST(ProtoTest, OptionalFieldsKeepUnsetApartFromZero) {
  // top_p = 0 is invalid while unset means 1.0, and K = 0 (off) differs from unset
  // (adaptive): presence must survive the wire.
  GenerateRequest unset;
  unset.mutable_sampling();
  unset.mutable_speculation();
  GenerateRequest zero;
  zero.mutable_sampling()->set_top_p(0.0f);
  zero.mutable_speculation()->set_num_speculative_tokens(0);

  GenerateRequest a = RoundTrip(unset);
  GenerateRequest b = RoundTrip(zero);
  EXPECT_FALSE(a.sampling().has_top_p());
  EXPECT_FALSE(a.sampling().has_seed());
  EXPECT_FALSE(a.speculation().has_num_speculative_tokens());
  EXPECT_TRUE(b.sampling().has_top_p());
  EXPECT_TRUE(b.speculation().has_num_speculative_tokens());
  EXPECT_EQ(b.speculation().num_speculative_tokens(), 0);
}

TEST(ProtoTest, PromptOneofKeepsLastAlternative) {
  GenerateRequest req;
  req.set_text("x");
  req.mutable_token_ids()->add_ids(5);
  req.mutable_token_ids()->add_ids(7);
  GenerateRequest out = RoundTrip(req);
  EXPECT_EQ(out.prompt_case(), GenerateRequest::kTokenIds);
  EXPECT_EQ(out.text(), "");
  ASSERT_EQ(out.token_ids().ids_size(), 2);
  EXPECT_EQ(out.token_ids().ids(1), 7);
}

TEST(ProtoTest, DefaultsAreTheDocumentedOnes) {
  GenerateRequest req;
  EXPECT_EQ(req.sampling().temperature(), 0.0f);  // greedy
  EXPECT_EQ(req.speculation().method(), SPECULATION_METHOD_AUTO);
  EXPECT_EQ(req.speculation().acceptance_rule(), ACCEPTANCE_RULE_DEFAULT);
  EXPECT_EQ(req.max_new_tokens(), 0u);  // server default
  GenerateStreamResponse chunk;
  EXPECT_EQ(chunk.finish_reason(), FINISH_REASON_UNSPECIFIED);
}

TEST(ProtoTest, VerifyRequestCarriesRaggedBatchAndSparseProposals) {
  VerifyRequest req;
  for (int s = 0; s < 3; ++s) {
    VerifySequence* seq = req.add_sequences();
    seq->set_sequence_id(100 + s);
    seq->set_start_position(10 * s);
    seq->add_tokens(s + 1);
    for (int k = 0; k < s; ++k) {
      ProposedToken* p = seq->add_proposals();
      p->set_token(50 + k);
      p->add_q_ids(50 + k);
      p->add_q_probs(0.75f);
      p->add_q_ids(51 + k);
      p->add_q_probs(0.25f);
    }
    seq->mutable_sampling()->set_rule(ACCEPTANCE_RULE_REJECTION);
    seq->set_sample_index(s);
  }
  VerifyRequest out = RoundTrip(req);
  ASSERT_EQ(out.sequences_size(), 3);
  EXPECT_EQ(out.sequences(2).sequence_id(), 102u);
  EXPECT_EQ(out.sequences(2).start_position(), 20u);
  ASSERT_EQ(out.sequences(2).proposals_size(), 2);
  EXPECT_EQ(out.sequences(2).proposals(1).token(), 51);
  EXPECT_FLOAT_EQ(out.sequences(2).proposals(1).q_probs(0), 0.75f);
  EXPECT_EQ(out.sequences(0).proposals_size(), 0);
  EXPECT_EQ(out.sequences(1).sampling().rule(), ACCEPTANCE_RULE_REJECTION);
}

TEST(ProtoTest, UnknownFieldsFromNewerPeersAreKept) {
  // A newer peer may send fields this version does not know; parsing must succeed.
  WorkerStats stats;
  stats.set_kv_used_blocks(3);
  std::string wire;
  ASSERT_TRUE(stats.SerializeToString(&wire));
  wire += std::string("\xf8\x07\x01", 3);  // field 127, varint 1
  WorkerStats out;
  ASSERT_TRUE(out.ParseFromString(wire));
  EXPECT_EQ(out.kv_used_blocks(), 3u);
  std::string again;
  ASSERT_TRUE(out.SerializeToString(&again));
  EXPECT_EQ(again.size(), wire.size());
}

TEST(ProtoTest, MalformedBytesAreRejected) {
  GenerateRequest req;
  // Length-delimited field 2 claiming 100 bytes with only 3 present.
  EXPECT_FALSE(
      req.ParseFromString(std::string("\x12\x64"
                                      "abc",
                                      5)));
}

TEST(ProtoTest, RendezvousRoundTrip) {
  GetRequest req;
  req.add_keys("run/rank0");
  req.set_wait_ms(5000);
  GetRequest out = RoundTrip(req);
  ASSERT_EQ(out.keys_size(), 1);
  EXPECT_EQ(out.keys(0), "run/rank0");
  EXPECT_EQ(out.wait_ms(), 5000u);
}

}  // namespace
}  // namespace tandem::v1
