// RendezvousService hosted on a real gRPC server on loopback, used through GrpcStore:
// set/get, waiting for a key, timeouts, size limits and shutdown.
#include "comm/grpc_store.h"

#include <gtest/gtest.h>

#include <thread>

#include "comm/rendezvous_service.h"
#include "common/server.h"

namespace tandem {
namespace {

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    auto server = GrpcServer::Start(options, {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto store = GrpcStore::Connect("127.0.0.1:" + std::to_string(server_->port()));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = tandem::v1::Rendezvous::NewStub(channel_);
  }
  void TearDown() override {
    service_.Shutdown();
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // Raw RPC, bypassing the client's own checks, to test the server's validation.
  grpc::Status RawGet(const std::vector<std::string>& keys, uint32_t wait_ms,
                      tandem::v1::GetResponse* response) {
    tandem::v1::GetRequest request;
    for (const auto& k : keys) request.add_keys(k);
    request.set_wait_ms(wait_ms);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Get(&context, request, response);
  }
  grpc::Status RawSet(const std::string& key, const std::string& value) {
    tandem::v1::SetRequest request;
    request.set_key(key);
    request.set_value(value);
    tandem::v1::SetResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->Set(&context, request, &response);
  }

  RendezvousService service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<GrpcStore> store_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tandem::v1::Rendezvous::Stub> stub_;
};

TEST_F(RendezvousTest, SetThenGet) {
  std::string binary("id\0\xfe", 4);
  ASSERT_TRUE(store_->Set("run7/nccl_id", binary).ok());
  ASSERT_TRUE(store_->Set("run7/rank1", "10.0.0.2:5000").ok());
  auto values = store_->Get({"run7/rank1", "run7/nccl_id"}, absl::ZeroDuration());
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"10.0.0.2:5000", binary}));
  EXPECT_EQ(service_.num_keys(), 2u);
}

TEST_F(RendezvousTest, GetWaitsUntilTheKeyAppears) {
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(100));
    auto other = GrpcStore::Connect("127.0.0.1:" + std::to_string(server_->port()));
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->Set("late", "arrived").ok());
  });
  absl::Time start = absl::Now();
  auto value = store_->GetOne("late", absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "arrived");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(90));
}

TEST_F(RendezvousTest, MissingKeyGivesDeadlineExceeded) {
  absl::Time start = absl::Now();
  auto value = store_->GetOne("never", absl::Milliseconds(200));
  absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsDeadlineExceeded(value.status())) << value.status();
  EXPECT_NE(value.status().message().find("'never'"), std::string::npos) << value.status();
  EXPECT_GE(took, absl::Milliseconds(180));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST_F(RendezvousTest, ServerValidatesSizes) {
  tandem::v1::GetResponse response;
  EXPECT_EQ(RawSet("", "x").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawSet(std::string(513, 'k'), "x").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawSet(std::string(512, 'k'), "x").error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(RawSet("k", std::string((1 << 20) + 1, 'v')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawSet("k", std::string(1 << 20, 'v')).error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(RawGet({}, 0, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawGet(std::vector<std::string>(65, "k"), 0, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawGet({"k"}, 600001, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(RawGet(std::vector<std::string>(64, "k"), 0, &response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_EQ(RawSet("small", "s").error_code(), grpc::StatusCode::OK);
  grpc::Status ok = RawGet(std::vector<std::string>(64, "small"), 0, &response);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(response.values_size(), 64);
}

TEST_F(RendezvousTest, ClientRejectsBadInputBeforeSending) {
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Set("", "x")));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Get({}, absl::ZeroDuration()).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(GrpcStore::Connect("no-port").status()));
}

TEST_F(RendezvousTest, ShutdownEndsWaitingGets) {
  absl::Status status;
  std::thread waiter([&] { status = store_->GetOne("never", absl::Seconds(30)).status(); });
  absl::SleepFor(absl::Milliseconds(100));
  absl::Time start = absl::Now();
  service_.Shutdown();
  waiter.join();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(GrpcStoreTest, UnreachableServerFailsWithinTheBudget) {
  // Port 1 (tcpmux) is privileged and not served here.
  auto store = GrpcStore::Connect("127.0.0.1:1", nullptr, absl::Milliseconds(300));
  ASSERT_TRUE(store.ok());
  absl::Time start = absl::Now();
  absl::Status set = (*store)->Set("k", "v");
  EXPECT_FALSE(set.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  start = absl::Now();
  auto get = (*store)->GetOne("k", absl::Milliseconds(200));
  EXPECT_FALSE(get.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace tandem
