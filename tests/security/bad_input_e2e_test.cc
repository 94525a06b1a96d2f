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
#include "tests/security/bad_requests.h"
#include "worker/process_test_util.h"

namespace tandem::security {
namespace {

using e2e::Cluster;
using e2e::ClusterOptions;
using worker::testing::Health;

constexpr int kMaxMessageBytes = 2 << 20;  // Coordinator and workers, this test.

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

TEST_F(BadInputE2eTest, WorkerApiAnswersEveryProtocolStatus) {
  const WorkerApiCases cases_of = WorkerCases();
  const std::vector<WorkerCase>& target_cases = cases_of.target;
  const std::vector<WorkerCase>& draft_cases = cases_of.draft;
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
    for (uint64_t id : {500, 602, 606}) release.add_sequence_ids(id);
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
