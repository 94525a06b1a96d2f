#include "coordinator/metrics_endpoint.h"

#include <gtest/gtest.h>

namespace tandem::coordinator {
namespace {

TEST(MetricsEndpointTest, ParsesThePortOfHostPort) {
  EXPECT_EQ(*ParseMetricsPort("127.0.0.1:9090"), 9090);
  EXPECT_EQ(*ParseMetricsPort("[::1]:0"), 0);
  for (const char* bad : {"9090", ":9090", "host:", "host:x", "host:-1", "host:65536"}) {
    const auto port = ParseMetricsPort(bad);
    EXPECT_FALSE(port.ok()) << bad;
    if (!port.ok()) EXPECT_NE(std::string(port.status().message()).find(bad), std::string::npos);
  }
}

TEST(MetricsEndpointTest, LocalHostIsTheHostOrLoopbackForAWildcard) {
  EXPECT_EQ(LocalHostOf("10.1.2.3:80"), "10.1.2.3");
  EXPECT_EQ(LocalHostOf("[fe80::1]:80"), "fe80::1");
  EXPECT_EQ(LocalHostOf("0.0.0.0:80"), "127.0.0.1");
  EXPECT_EQ(LocalHostOf(":80"), "127.0.0.1");
  EXPECT_EQ(LocalHostOf("[::]:80"), "::1");
}

}  // namespace
}  // namespace tandem::coordinator
