// Bad input through the real servers (tandem-coordinator and tandem-worker processes):
//  * the public API: one row per validation rule of GenerateRequest, each with its
//    status code;
//  * the worker API: every status code of worker.proto's header;
//  * oversized messages (over --max_message_bytes): RESOURCE_EXHAUSTED;
//  * malformed protobuf bytes sent with grpc::GenericStub: bytes that do not parse
//    answer INVALID_ARGUMENT "request could not be parsed as <type>: <reason>"
//    (common/request_parsing.h) on both APIs; bytes that parse (wrong wire type =
//    unknown field, repeated oneof) reach the validator.
// After all of it, every process is still serving, per service too.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <functional>
#include <future>

#include "absl/strings/str_cat.h"
#include "tests/e2e/cluster.h"
#include "worker/process_test_util.h"

namespace tandem::security {
namespace {

using e2e::Cluster;
using e2e::ClusterOptions;
using worker::testing::Health;

constexpr int kMaxMessageBytes = 2 << 20;  // Coordinator and workers, this test.
constexpr int kVocab = 2048;               // models/target and models/draft.

class BadInputE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.tp = 1;
    options.tag = "badinput";
    // A small KV cache (1024 target tokens) so that one request can overflow it.
    options.worker_flags = {"--kv_cache_mb=2", "--max_speculative_tokens=8",
                            absl::StrCat("--max_message_bytes=", kMaxMessageBytes)};
    options.coordinator_flags = {absl::StrCat("--max_message_bytes=", kMaxMessageBytes),
                                 "--max_k=8"};
    auto cluster = Cluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static void ExpectAllServing() {
    using worker::testing::CheckHealth;
    EXPECT_EQ(CheckHealth(cluster_->address()), Health::kServing);
    EXPECT_EQ(CheckHealth(cluster_->address(), "tandem.v1.Tandem"), Health::kServing);
    for (const std::string& worker :
         {cluster_->target().leader_address(), cluster_->draft()->leader_address()}) {
      EXPECT_EQ(CheckHealth(worker), Health::kServing) << worker;
      EXPECT_EQ(CheckHealth(worker, "tandem.v1.Worker"), Health::kServing) << worker;
      EXPECT_EQ(CheckHealth(worker, "tandem.v1.Tandem"), Health::kUnknownService) << worker;
    }
  }

  static Cluster* cluster_;
};
Cluster* BadInputE2eTest::cluster_ = nullptr;

// ---- the public API ----

struct PublicCase {
  std::string name;
  std::function<void(v1::GenerateRequest&)> edit;
  grpc::StatusCode code;
};

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
      {"medusa not enabled",
       [](R& r) { r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_MEDUSA); },
       grpc::FAILED_PRECONDITION},
      {"lookahead not enabled",
       [](R& r) { r.mutable_speculation()->set_method(v1::SPECULATION_METHOD_LOOKAHEAD); },
       grpc::FAILED_PRECONDITION},
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

TEST_F(BadInputE2eTest, PublicApiAnswersEveryValidationRuleWithItsCode) {
  auto stub = cluster_->Client();
  for (const PublicCase& c : PublicCases()) {
    for (bool stream : {false, true}) {
      v1::GenerateRequest request;
      request.set_text("def add(a, b):");
      request.set_max_new_tokens(4);
      c.edit(request);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status status;
      if (stream) {
        auto reader = stub->GenerateStream(&ctx, request);
        v1::GenerateStreamResponse chunk;
        while (reader->Read(&chunk)) {
        }
        status = reader->Finish();
      } else {
        v1::GenerateResponse response;
        status = stub->Generate(&ctx, request, &response);
      }
      SCOPED_TRACE(absl::StrCat(c.name, stream ? " (stream)" : " (unary)"));
      EXPECT_EQ(status.error_code(), c.code) << status.error_message();
      if (c.code != grpc::OK) {
        EXPECT_FALSE(status.error_message().empty());
      }
    }
  }
  ExpectAllServing();
}

// ---- raw bytes ----

// One unary call with `bytes` as the serialized request; the response bytes in `out`.
grpc::Status RawCall(const std::string& address, const std::string& method,
                     const std::string& bytes, std::string* out = nullptr) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  if (status.ok() && out != nullptr) {
    std::vector<grpc::Slice> slices;
    (void)response.Dump(&slices);
    out->clear();
    for (const grpc::Slice& s : slices)
      out->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

struct RawCase {
  std::string name;
  std::string bytes;
  grpc::StatusCode code;
  std::string message = "";  // Expected in the status message (when not empty).
};

void ExpectRawCase(const std::string& address, const std::string& method, const RawCase& c) {
  grpc::Status status = RawCall(address, method, c.bytes);
  EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
  EXPECT_NE(status.error_message().find(c.message), std::string::npos)
      << c.name << ": got \"" << status.error_message() << "\", want \"" << c.message << "\"";
}

TEST_F(BadInputE2eTest, MalformedProtobufsAnswerInvalidArgumentWithTheReason) {
  // GenerateRequest: text = field 2 (length-delimited), token_ids = field 3 (message
  // TokenIds { repeated int32 ids = 1 }), max_new_tokens = field 4 (varint).
  const std::string text = Bytes({0x12, 0x04}) + "def ";
  const std::string max4 = Bytes({0x20, 0x04});
  const std::string unparsed = "request could not be parsed as tandem.v1.GenerateRequest: ";
  const std::vector<RawCase> cases = {
      {"well formed (control)", text + max4, grpc::OK},
      {"empty message: no prompt", "", grpc::INVALID_ARGUMENT},
      {"unknown field 100 is skipped", text + max4 + Bytes({0xA0, 0x06, 0x01}), grpc::OK},
      {"text sent as a varint: wrong wire type, kept as an unknown field, no prompt",
       Bytes({0x10, 0x05}) + max4, grpc::INVALID_ARGUMENT},
      {"oneof given twice: the last (token_ids) wins",
       text + Bytes({0x1A, 0x03, 0x0A, 0x01, 0x05}) + max4, grpc::OK},
      {"truncated varint", text + Bytes({0x20, 0x80}), grpc::INVALID_ARGUMENT,
       unparsed + "field tandem.v1.GenerateRequest.max_new_tokens (4) at byte 6: truncated varint"},
      {"varint longer than 10 bytes",
       text + Bytes({0x20, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}),
       grpc::INVALID_ARGUMENT, "longer than 10 bytes"},
      {"length past the end", Bytes({0x12, 0x10}) + "abc", grpc::INVALID_ARGUMENT,
       unparsed + "field tandem.v1.GenerateRequest.text (2) at byte 0: length 16 runs past"},
      {"length of 4 GiB", Bytes({0x12, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F}) + "abc",
       grpc::INVALID_ARGUMENT, unparsed + "field tandem.v1.GenerateRequest.text (2) at byte 0"},
      {"invalid UTF-8 in text", Bytes({0x12, 0x02, 0xC3, 0x28}) + max4, grpc::INVALID_ARGUMENT,
       unparsed + "field tandem.v1.GenerateRequest.text (2) is not valid UTF-8 (byte 2)"},
      {"invalid UTF-8 in a stop string", text + max4 + Bytes({0x2A, 0x01, 0xFF}),
       grpc::INVALID_ARGUMENT,
       unparsed + "field tandem.v1.GenerateRequest.stop (5) is not valid UTF-8 (byte 10)"},
      {"wire type 7", text + Bytes({0x27, 0x00}), grpc::INVALID_ARGUMENT,
       unparsed + "invalid wire type 7 at byte 6"},
      {"field number 0", Bytes({0x02, 0x00}) + text, grpc::INVALID_ARGUMENT,
       unparsed + "field number 0 at byte 0"},
      {"start group without its end", text + Bytes({0xA3, 0x06}), grpc::INVALID_ARGUMENT,
       unparsed + "unknown field 100 at byte 6: group without its end-group tag"},
      {"truncated packed token ids", Bytes({0x1A, 0x03, 0x0A, 0x05, 0x05}), grpc::INVALID_ARGUMENT,
       unparsed + "field tandem.v1.TokenIds.ids (1) at byte 2: length 5"},
      {"packed token ids with a truncated varint inside",
       Bytes({0x1A, 0x04, 0x0A, 0x02, 0x05, 0x80}), grpc::INVALID_ARGUMENT,
       unparsed + "packed field tandem.v1.TokenIds.ids (1): truncated varint at byte 5"},
      {"garbage", Bytes({0xFF, 0xFF, 0xFF}), grpc::INVALID_ARGUMENT,
       unparsed + "malformed field tag at byte 0"},
  };
  for (const RawCase& c : cases)
    ExpectRawCase(cluster_->address(), "/tandem.v1.Tandem/Generate", c);
  // The streaming method and GetModelInfo parse the same way.
  ExpectRawCase(cluster_->address(), "/tandem.v1.Tandem/GenerateStream",
                {"stream, invalid UTF-8", Bytes({0x12, 0x01, 0xFF}), grpc::INVALID_ARGUMENT,
                 unparsed + "field tandem.v1.GenerateRequest.text (2) is not valid UTF-8"});
  ExpectRawCase(cluster_->address(), "/tandem.v1.Tandem/GetModelInfo",
                {"model info, garbage", Bytes({0x0F}), grpc::INVALID_ARGUMENT,
                 "request could not be parsed as tandem.v1.GetModelInfoRequest: invalid wire "
                 "type 7 at byte 0"});
  // So does the worker API, on the target leader and on the draft.
  const std::vector<std::pair<std::string, RawCase>> worker_cases = {
      {"Describe", {"Describe, well formed", "", grpc::OK}},
      {"Verify",
       {"Verify, truncated varint", Bytes({0x0A, 0x02, 0x08, 0x80}), grpc::INVALID_ARGUMENT,
        "request could not be parsed as tandem.v1.VerifyRequest: field "
        "tandem.v1.VerifySequence.sequence_id (1) at byte 2: truncated varint"}},
      {"Prefill",
       {"Prefill, length past the end", Bytes({0x0A, 0x20, 0x08, 0x01}), grpc::INVALID_ARGUMENT,
        "request could not be parsed as tandem.v1.PrefillRequest: field "
        "tandem.v1.PrefillRequest.sequences (1) at byte 0: length 32 runs past"}},
      {"Release",
       {"Release, wire type 6", Bytes({0x0E}), grpc::INVALID_ARGUMENT,
        "request could not be parsed as tandem.v1.ReleaseRequest: invalid wire type 6 at byte 0"}},
  };
  for (const std::string& worker :
       {cluster_->target().leader_address(), cluster_->draft()->leader_address()}) {
    for (const auto& [method, c] : worker_cases) {
      ExpectRawCase(worker, absl::StrCat("/tandem.v1.Worker/", method), c);
    }
  }
  EXPECT_EQ(RawCall(cluster_->address(), "/tandem.v1.Tandem/NoSuchMethod", "").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  ExpectAllServing();
}

TEST_F(BadInputE2eTest, OversizedMessagesAreRefused) {
  // Just over the limit: refused by gRPC before parsing. (A 1.5 MiB prompt is under the
  // message limit but over the prompt limit: the validator's INVALID_ARGUMENT.)
  auto stub = cluster_->Client();
  for (const auto& [bytes, code] : std::vector<std::pair<int, grpc::StatusCode>>{
           {kMaxMessageBytes + 1024, grpc::RESOURCE_EXHAUSTED},
           {(3 << 20) / 2, grpc::INVALID_ARGUMENT}}) {
    v1::GenerateRequest request;
    request.set_text(std::string(bytes, 'a'));
    grpc::ClientContext ctx;
    v1::GenerateResponse response;
    grpc::Status status = stub->Generate(&ctx, request, &response);
    EXPECT_EQ(status.error_code(), code) << bytes << " bytes: " << status.error_message();
  }
  // A worker refuses an oversized step message the same way.
  v1::PrefillRequest prefill;
  v1::PrefillSequence* s = prefill.add_sequences();
  s->set_sequence_id(1);
  for (int i = 0; i < kMaxMessageBytes / 2; ++i) s->add_tokens(1000);  // 2 bytes each + tag
  auto worker = worker::testing::WorkerStub(cluster_->target().leader_address());
  grpc::ClientContext ctx;
  v1::PrefillResponse response;
  EXPECT_EQ(worker->Prefill(&ctx, prefill, &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  ExpectAllServing();
}

// ---- the worker API ----

v1::ProposedToken Proposal(int token) {
  v1::ProposedToken p;
  p.set_token(token);
  p.add_q_ids(token);
  p.add_q_probs(1.0f);
  return p;
}

struct WorkerCase {
  std::string name;
  std::function<grpc::Status(v1::Worker::Stub*, grpc::ClientContext*)> call;
  grpc::StatusCode code;
};

template <typename Request, typename Response>
grpc::Status Call(grpc::Status (v1::Worker::Stub::*method)(grpc::ClientContext*, const Request&,
                                                           Response*),
                  v1::Worker::Stub* stub, grpc::ClientContext* ctx, const Request& request) {
  Response response;
  return (stub->*method)(ctx, request, &response);
}

v1::VerifyRequest VerifyOf(uint64_t id, uint32_t start, std::vector<int> tokens,
                           std::vector<v1::ProposedToken> proposals = {}) {
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

v1::PrefillRequest PrefillOf(uint64_t id, uint32_t start, int count, int token = 7) {
  v1::PrefillRequest r;
  v1::PrefillSequence* s = r.add_sequences();
  s->set_sequence_id(id);
  s->set_start_position(start);
  for (int i = 0; i < count; ++i) s->add_tokens(token);
  return r;
}

TEST_F(BadInputE2eTest, WorkerApiAnswersEveryProtocolStatus) {
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
  v1::VerifyRequest tree_rejection = VerifyOf(602, 0, {1}, {Proposal(3), Proposal(4)});
  tree_rejection.mutable_sequences(0)->add_proposal_parents(-1);
  tree_rejection.mutable_sequences(0)->add_proposal_parents(-1);
  tree_rejection.mutable_sequences(0)->mutable_sampling()->set_rule(v1::ACCEPTANCE_RULE_REJECTION);
  tree_rejection.mutable_sequences(0)->mutable_sampling()->set_temperature(1.0f);
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
      {"Verify, bad sampling", V(bad_sampling), grpc::INVALID_ARGUMENT},
      {"Truncate, longer than cached",
       [truncate_up](S* s, C* c) { return Call(&S::Truncate, s, c, truncate_up); },
       grpc::INVALID_ARGUMENT},
      {"Verify, unknown sequence at a later position", V(VerifyOf(608, 5, {1})), grpc::NOT_FOUND},
      {"Prefill, over max_batch_tokens", P(PrefillOf(609, 0, 1025)), grpc::RESOURCE_EXHAUSTED},
      {"Prefill, over the KV cache", kv_hog, grpc::RESOURCE_EXHAUSTED},
      {"Verify, tree under rejection sampling", V(tree_rejection), grpc::UNIMPLEMENTED},
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
  for (const auto& [address, cases] :
       std::vector<std::pair<std::string, const std::vector<WorkerCase>*>>{
           {cluster_->target().leader_address(), &target_cases},
           {cluster_->draft()->leader_address(), &draft_cases}}) {
    auto stub = worker::testing::WorkerStub(address);
    {
      grpc::ClientContext ctx;
      v1::PrefillResponse r;
      ASSERT_TRUE(stub->Prefill(&ctx, PrefillOf(500, 0, 4), &r).ok());
    }
    for (const WorkerCase& c : *cases) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status status = c.call(stub.get(), &ctx);
      EXPECT_EQ(status.error_code(), c.code) << c.name << ": " << status.error_message();
      if (c.code != grpc::OK) {
        EXPECT_FALSE(status.error_message().empty()) << c.name;
      }
    }
    grpc::ClientContext ctx;
    v1::ReleaseRequest release;
    for (uint64_t id : {500, 606}) release.add_sequence_ids(id);
    for (uint64_t id = 700; id < 710; ++id) release.add_sequence_ids(id);
    v1::ReleaseResponse released;
    EXPECT_TRUE(stub->Release(&ctx, release, &released).ok());
  }
  ExpectAllServing();
}

TEST_F(BadInputE2eTest, TargetGroupWithALostRankAnswersUnavailable) {
  auto group = worker::testing::WorkerGroup::Start(
      "models/target", 2, "badinput-group",
      {"--step_timeout_s=3", "--heartbeat_s=0.5", "--leader_timeout_s=4", "--regroup_timeout_s=4"});
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE(worker::testing::WaitForHealth((*group)->leader_address(), Health::kServing,
                                             absl::Seconds(60)))
      << (*group)->Logs();
  (*group)->process(1).Signal(SIGKILL);
  auto stub = worker::testing::WorkerStub((*group)->leader_address());
  grpc::Status status;
  const absl::Time end = absl::Now() + absl::Seconds(30);
  for (uint64_t id = 1; absl::Now() < end; ++id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::VerifyResponse response;
    status = stub->Verify(&ctx, VerifyOf(id, 0, {1}), &response);
    if (!status.ok()) break;
  }
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

}  // namespace
}  // namespace tandem::security
