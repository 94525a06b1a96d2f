// DescribeParseError on hand-made wire bytes, and ParsingService end to end: a real
// gRPC server whose methods parse their requests in Tandem code, called with raw
// bytes through grpc::GenericStub and with the ordinary typed stub.
#include "common/request_parsing.h"

#include <google/protobuf/struct.pb.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>

#include "common/server.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem {
namespace {

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

// GenerateRequest: text = field 2 (string), token_ids = field 3 (TokenIds { repeated
// int32 ids = 1 }), max_new_tokens = field 4 (varint), stop = field 5 (string).
const std::string kText = Bytes({0x12, 0x04}) + "def ";

std::string Describe(const std::string& bytes) {
  return DescribeParseError(bytes, *v1::GenerateRequest::descriptor());
}

TEST(DescribeParseErrorTest, ValidBytesHaveNoError) {
  v1::GenerateRequest request;
  request.set_text("def f():");
  request.set_max_new_tokens(7);
  request.add_stop("\n\n");
  request.mutable_sampling()->set_temperature(0.5f);
  EXPECT_EQ(Describe(request.SerializeAsString()), "");
  v1::GenerateRequest ids;
  for (int t : {1, 300, 70000}) ids.mutable_token_ids()->add_ids(t);
  EXPECT_EQ(Describe(ids.SerializeAsString()), "");
  EXPECT_EQ(Describe(""), "");
  // Unknown fields of every wire type (and a group) are valid.
  EXPECT_EQ(Describe(kText + Bytes({0xF8, 0x01, 0x05, 0xA3, 0x06, 0x08, 0x01, 0xA4, 0x06})), "");
}

TEST(DescribeParseErrorTest, NamesTheReasonTheFieldAndTheOffset) {
  struct Case {
    std::string bytes, want;
  };
  const std::vector<Case> cases = {
      {kText + Bytes({0x20, 0x80}),
       "field tandem.v1.GenerateRequest.max_new_tokens (4) at byte 6: truncated varint"},
      {kText + Bytes({0x20, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}),
       "longer than 10 bytes"},
      {Bytes({0x12, 0x10}) + "abc",
       "field tandem.v1.GenerateRequest.text (2) at byte 0: length 16 runs past the end of its "
       "message (3 bytes left)"},
      {Bytes({0x12, 0x02, 0xC3, 0x28}),
       "field tandem.v1.GenerateRequest.text (2) is not valid UTF-8 (byte 2)"},
      {kText + Bytes({0x2A, 0x01, 0xFF}), "field tandem.v1.GenerateRequest.stop (5) is not valid"},
      {kText + Bytes({0x27, 0x00}), "invalid wire type 7 at byte 6"},
      {Bytes({0x02, 0x00}) + kText, "field number 0 at byte 0"},
      {kText + Bytes({0xA3, 0x06}), "unknown field 100 at byte 6: group without its end-group"},
      {kText + Bytes({0x0C}), "end-group tag without a group at byte 6"},
      {Bytes({0x1A, 0x03, 0x0A, 0x05, 0x05}),
       "field tandem.v1.TokenIds.ids (1) at byte 2: length 5 runs past the end of its message "
       "(1 bytes left)"},
      {Bytes({0x1A, 0x04, 0x0A, 0x02, 0x05, 0x80}),
       "packed field tandem.v1.TokenIds.ids (1): truncated varint at byte 5"},
      {kText + Bytes({0x80}), "malformed field tag at byte 6"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest parsed;
    EXPECT_FALSE(parsed.ParseFromString(c.bytes)) << c.want;  // Protobuf refuses it too.
    const std::string got = Describe(c.bytes);
    EXPECT_NE(got.find(c.want), std::string::npos) << "got: " << got << "\nwant: " << c.want;
  }
}

TEST(DescribeParseErrorTest, NestingPastTheLimitIsReported) {
  // google.protobuf.Value nests through list_value.values; 101 levels parse nowhere.
  google::protobuf::Value value;
  google::protobuf::Value* leaf = &value;
  for (int i = 0; i < 101; ++i) leaf = leaf->mutable_list_value()->add_values();
  leaf->set_number_value(1);
  const std::string bytes = value.SerializeAsString();
  google::protobuf::Value parsed;
  EXPECT_FALSE(parsed.ParseFromString(bytes));
  EXPECT_EQ(DescribeParseError(bytes, *google::protobuf::Value::descriptor()),
            "messages nested deeper than 100");
}

// ---- ParsingService on a real server ----

class EchoTandem final : public ParsingService<v1::Tandem> {
 public:
  EchoTandem() {
    ParseUnary(this, "Generate", &EchoTandem::Generate);
    ParseServerStreaming(this, "GenerateStream", &EchoTandem::GenerateStream);
    ParseUnary(this, "GetModelInfo", &EchoTandem::GetModelInfo);
    CheckEveryMethodParsed();
  }
  grpc::Status Generate(grpc::ServerContext*, const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override {
    if (request->text() == "fail") return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "asked");
    response->set_text(request->text());
    return grpc::Status::OK;
  }
  grpc::Status GenerateStream(grpc::ServerContext*, const v1::GenerateRequest* request,
                              ResponseWriter<v1::GenerateStreamResponse>* writer) {
    for (uint32_t i = 0; i < request->max_new_tokens(); ++i) {
      v1::GenerateStreamResponse out;
      out.set_text_delta(request->text());
      if (!writer->Write(out)) break;
    }
    return grpc::Status::OK;
  }
  grpc::Status GetModelInfo(grpc::ServerContext*, const v1::GetModelInfoRequest*,
                            v1::ModelInfo* info) override {
    info->set_context_length(4096);
    return grpc::Status::OK;
  }
};

class ParsingServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    auto server = GrpcServer::Start(options, {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }

  grpc::Status RawCall(const std::string& method, const std::string& bytes) {
    grpc::GenericStub stub(channel_);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    std::promise<grpc::Status> done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  EchoTandem service_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ParsingServiceTest, TypedCallsWorkAsBefore) {
  auto stub = v1::Tandem::NewStub(channel_);
  v1::GenerateRequest request;
  request.set_text("héllo");
  request.set_max_new_tokens(3);
  v1::GenerateResponse response;
  grpc::ClientContext c1;
  ASSERT_TRUE(stub->Generate(&c1, request, &response).ok());
  EXPECT_EQ(response.text(), "héllo");

  grpc::ClientContext c2;
  auto reader = stub->GenerateStream(&c2, request);
  v1::GenerateStreamResponse chunk;
  int chunks = 0;
  while (reader->Read(&chunk)) {
    EXPECT_EQ(chunk.text_delta(), "héllo");
    ++chunks;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(chunks, 3);

  grpc::ClientContext c3;
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModelInfo(&c3, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.context_length(), 4096u);

  // A service error keeps its code and message, and no response is sent.
  request.set_text("fail");
  grpc::ClientContext c4;
  grpc::Status failed = stub->Generate(&c4, request, &response);
  EXPECT_EQ(failed.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(failed.error_message(), "asked");
}

TEST_F(ParsingServiceTest, MalformedBytesAnswerInvalidArgumentWithTheReason) {
  for (const char* method : {"/tandem.v1.Tandem/Generate", "/tandem.v1.Tandem/GenerateStream"}) {
    grpc::Status status = RawCall(method, Bytes({0x12, 0x02, 0xC3, 0x28}));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_EQ(status.error_message(),
              "request could not be parsed as tandem.v1.GenerateRequest: field "
              "tandem.v1.GenerateRequest.text (2) is not valid UTF-8 (byte 2)")
        << method;
  }
  grpc::Status garbage = RawCall("/tandem.v1.Tandem/GetModelInfo", Bytes({0xFF, 0xFF}));
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(garbage.error_message(),
            "request could not be parsed as tandem.v1.GetModelInfoRequest: malformed field tag "
            "at byte 0");
  // Valid bytes through the same raw path still reach the service.
  v1::GenerateRequest request;
  request.set_text("ok");
  EXPECT_TRUE(RawCall("/tandem.v1.Tandem/Generate", request.SerializeAsString()).ok());
}

}  // namespace
}  // namespace tandem
