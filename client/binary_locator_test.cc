#include "client/binary_locator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BinaryCandidatesTest, SiblingsThenBazelTreeThenRunfilesThenPath) {
  EXPECT_THAT(BinaryCandidates("/b/client/tandem", "worker", "tandem-worker", "/rf", "/ts",
                               "/usr/bin::/opt/bin"),
              ElementsAre("/b/client/tandem-worker", "/b/client/../worker/tandem-worker",
                          "/b/client/tandem.runfiles/tandem/worker/tandem-worker",
                          "/rf/tandem/worker/tandem-worker", "/ts/tandem/worker/tandem-worker",
                          "/usr/bin/tandem-worker", "/opt/bin/tandem-worker"));
  EXPECT_THAT(BinaryCandidates("", "worker", "w", "", "", ""), ElementsAre());
}

TEST(FindBinaryTest, FindsThingsOnPathAndExplainsFailures) {
  auto sh = FindBinary("nowhere", "sh");
  ASSERT_TRUE(sh.ok()) << sh.status();
  EXPECT_THAT(*sh, HasSubstr("sh"));
  auto missing = FindBinary("worker", "no-such-binary-xyz");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("bazel build //worker:no-such-binary-xyz"));
  EXPECT_FALSE(SelfPath().empty());
}

}  // namespace
}  // namespace tandem::client
