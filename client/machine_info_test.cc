#include "client/machine_info.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

namespace tandem::client {
namespace {

TEST(MachineInfoTest, DescribesThisMachine) {
  MachineInfo info = GetMachineInfo();
  EXPECT_FALSE(info.hostname.empty());
  EXPECT_EQ(info.kernel.rfind("Linux ", 0), 0u) << info.kernel;
  EXPECT_GE(info.online_cpus, 1);
  EXPECT_GE(info.allowed_cpus, 1);
  EXPECT_LE(info.allowed_cpus, info.online_cpus);
  EXPECT_GT(info.memory_gib, 0.1);
}

TEST(ResidentKibTest, GrowsWithTouchedMemory) {
  auto before = ResidentKib(getpid());
  ASSERT_TRUE(before.has_value());
  std::vector<char> block(64 << 20, 1);  // 64 MiB, touched.
  auto after = ResidentKib(getpid());
  ASSERT_TRUE(after.has_value());
  EXPECT_GT(*after - *before, 32 * 1024) << block[12345];
  EXPECT_FALSE(ResidentKib(-5).has_value());
}

}  // namespace
}  // namespace tandem::client
