#include "common/grpc_status.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

TEST(GrpcStatusTest, EveryCanonicalCodeRoundTrips) {
  for (int code = 0; code <= 16; ++code) {
    absl::Status s(static_cast<absl::StatusCode>(code),
                   code == 0 ? "" : "msg " + std::to_string(code));
    grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), code);
    absl::Status back = FromGrpcStatus(g);
    EXPECT_EQ(back, s);
  }
}

TEST(GrpcStatusTest, MessageIsKept) {
  grpc::Status g(grpc::StatusCode::NOT_FOUND, "unknown sequence 7");
  absl::Status s = FromGrpcStatus(g);
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_EQ(s.message(), "unknown sequence 7");
}

}  // namespace
}  // namespace tandem
