#include "coordinator/request_validation_test_fixture.h"

#include <gmock/gmock.h>

#include <random>

namespace tandem::coordinator {

ServerLimits TestLimits() {
  ServerLimits limits;
  limits.context_length = 64;
  limits.vocab_size = 100;
  return limits;
}

v1::GenerateRequest BaseRequest() {
  v1::GenerateRequest r;
  r.set_text("Hello");
  return r;
}

absl::StatusOr<ValidatedRequest> Validate(const v1::GenerateRequest& r,
                                          const ServerLimits& limits) {
  std::mt19937_64 rng(99);
  return ValidateRequest(r, limits, rng);
}

void ExpectRejected(const RejectCase& c) {
  v1::GenerateRequest r = BaseRequest();
  c.mutate(r);
  absl::StatusOr<ValidatedRequest> result = Validate(r);
  ASSERT_FALSE(result.ok()) << c.name;
  EXPECT_EQ(result.status().code(), c.code) << result.status();
  EXPECT_THAT(std::string(result.status().message()), ::testing::HasSubstr(c.message_part));
}

std::string RejectCaseName(const ::testing::TestParamInfo<RejectCase>& info) {
  return std::string(info.param.name);
}

}  // namespace tandem::coordinator
