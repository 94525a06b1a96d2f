#include "client/free_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

namespace tandem::client {
namespace {

TEST(FreePortsTest, DistinctAndBindable) {
  auto ports = FreePorts("127.0.0.1", 8);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 8u);
  EXPECT_EQ(std::set<int>(ports->begin(), ports->end()).size(), 8u);
  for (int port : *ports) {
    EXPECT_GT(port, 0);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << port;
    close(fd);
  }
}

TEST(FreePortsTest, RejectsNonAddresses) {
  EXPECT_FALSE(FreePorts("localhost", 1).ok());
  EXPECT_FALSE(FreePorts("10.77.0.300", 1).ok());
}

}  // namespace
}  // namespace tandem::client
