#include "client/health.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/server.h"

namespace tandem::client {
namespace {

TEST(CheckServingTest, FollowsTheServerHealth) {
  ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = GrpcServer::Start(options, {});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = "127.0.0.1:" + std::to_string((*server)->port());
  absl::Status before = CheckServing(address, absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(before)) << before;
  EXPECT_THAT(std::string(before.message()), ::testing::HasSubstr("NOT_SERVING"));
  (*server)->SetServing(true);
  EXPECT_TRUE(CheckServing(address, absl::Seconds(5)).ok());
  (*server)->Shutdown(absl::Milliseconds(100));
  EXPECT_FALSE(CheckServing(address, absl::Milliseconds(500)).ok());
}

TEST(CheckServingTest, NothingListeningIsUnavailable) {
  absl::Status s = CheckServing("127.0.0.1:1", absl::Milliseconds(500));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace tandem::client
