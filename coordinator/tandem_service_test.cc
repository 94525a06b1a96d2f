// tandem.v1.Tandem over an engine with fake workers, through a real in-process gRPC
// server: the requests_total metric uses the status the client saw (a deadline that
// expires mid-request is DEADLINE_EXCEEDED, not CANCELLED; a client cancel is
// CANCELLED), for unary and streaming calls; ModelInfo describes a draft that came up
// after start-up.
#include "coordinator/tandem_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "common/server.h"
#include "coordinator/fake_worker.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::coordinator {
namespace {

double Metric(const CoordinatorMetrics& m, const std::string& series) {
  const std::string text = m.Serialize();
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + series.size() + 2));
}

class TandemServiceTest : public ::testing::Test {
 protected:
  void Start(bool draft_up_at_start = true) {
    auto t = Tokenizer::Load("models/target");
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
    metrics_ = *CoordinatorMetrics::Create({});
    FakeWorkerOptions target, draft;
    target.step_delay = absl::Milliseconds(5);  // A 2000-token request takes seconds.
    draft.draft = true;
    auto d = std::make_unique<FakeWorker>(draft, "draft");
    draft_ = d.get();
    if (!draft_up_at_start) draft_->SetDown(true);
    EngineOptions eo;
    eo.monitor_interval = absl::Milliseconds(10);
    engine_ = std::make_unique<Engine>(eo, tokenizer_.get(),
                                       std::make_unique<FakeWorker>(target, "target"), std::move(d),
                                       metrics_.get());
    ASSERT_TRUE(engine_->Start(absl::Milliseconds(100)).ok());
    ServerLimits limits;
    limits.context_length = 2048;
    limits.vocab_size = 2048;
    v1::ModelInfo info;
    if (engine_->cluster().draft_described)
      *info.mutable_draft() = engine_->cluster().draft.model();
    service_ = std::make_unique<TandemService>(engine_.get(), tokenizer_.get(), limits, info,
                                               metrics_.get());
    ServerOptions so;
    so.listen_address = "127.0.0.1:0";
    auto server = GrpcServer::Start(so, {service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_->SetServing(true);
    stub_ = v1::Tandem::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
    if (engine_) engine_->Stop();
  }

  static v1::GenerateRequest LongRequest() {
    v1::GenerateRequest r;
    r.set_text("def add(a, b):\n");
    r.set_max_new_tokens(2000);
    r.set_ignore_eos(true);
    return r;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<TandemService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::Tandem::Stub> stub_;
  FakeWorker* draft_ = nullptr;
};

TEST_F(TandemServiceTest, ExpiredDeadlinesCountAsDeadlineExceededForUnaryAndStream) {
  Start();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    v1::GenerateResponse response;
    grpc::Status st = stub_->Generate(&ctx, LongRequest(), &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
    auto reader = stub_->GenerateStream(&ctx, LongRequest());
    v1::GenerateStreamResponse chunk;
    while (reader->Read(&chunk)) {
    }
    grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  }
  // The handlers finish shortly after the client saw the status.
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (Metric(*metrics_, "tandem_requests_total{status=\"deadline_exceeded\"}") < 2 &&
         absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Metric(*metrics_, "tandem_requests_total{status=\"deadline_exceeded\"}"), 2);
  EXPECT_EQ(Metric(*metrics_, "tandem_requests_total{status=\"cancelled\"}"), 0);
}

TEST_F(TandemServiceTest, ClientCancelCountsAsCancelled) {
  Start();
  grpc::ClientContext ctx;
  auto reader = stub_->GenerateStream(&ctx, LongRequest());
  v1::GenerateStreamResponse chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  ctx.TryCancel();
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (Metric(*metrics_, "tandem_requests_total{status=\"cancelled\"}") < 1 &&
         absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Metric(*metrics_, "tandem_requests_total{status=\"cancelled\"}"), 1);
  EXPECT_EQ(Metric(*metrics_, "tandem_requests_total{status=\"deadline_exceeded\"}"), 0);
}

TEST_F(TandemServiceTest, ADraftThatComesUpLateIsDescribed) {
  Start(/*draft_up_at_start=*/false);
  EXPECT_FALSE(engine_->cluster().draft_described);
  EXPECT_EQ(Metric(*metrics_, "tandem_draft_available"), 0);
  draft_->SetDown(false);
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (!engine_->draft_available() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(engine_->draft_available());
  EXPECT_EQ(Metric(*metrics_, "tandem_draft_available"), 1);
  grpc::ClientContext ctx;
  v1::ModelInfo info;
  ASSERT_TRUE(stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_TRUE(info.has_draft());
  EXPECT_EQ(info.draft().vocab_size(), 2048);
  EXPECT_TRUE(info.draft_available());
}

}  // namespace
}  // namespace tandem::coordinator
