#include "client/http_get.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/time/clock.h"

namespace tandem::client {
namespace {

// Serves one connection with `answer` (after reading the request) on a free port.
class OneShotServer {
 public:
  explicit OneShotServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 1);
    thread_ = std::thread([this] {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n > 0) request_.assign(buf, static_cast<size_t>(n));
      if (!answer_.empty()) {
        ssize_t ignored = send(c, answer_.data(), answer_.size(), 0);
        (void)ignored;
        close(c);
      } else {
        usleep(1500 * 1000);  // Say nothing: the client times out.
        close(c);
      }
    });
  }
  ~OneShotServer() {
    thread_.join();
    close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& request() const { return request_; }

 private:
  std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::string request_;
  std::thread thread_;
};

TEST(HttpGetTest, ReturnsTheBodyOfA200) {
  std::string body;
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nmetric 1\n");
    auto got = HttpGet(server.address(), "/metrics", absl::Seconds(5));
    ASSERT_TRUE(got.ok()) << got.status();
    body = *got;
  }
  EXPECT_EQ(body, "metric 1\n");
}

TEST(HttpGetTest, SendsAGetForThePath) {
  std::string request;
  {
    OneShotServer server("HTTP/1.0 200 OK\r\n\r\n");
    ASSERT_TRUE(HttpGet(server.address(), "/metrics", absl::Seconds(5)).ok());
    absl::SleepFor(absl::Milliseconds(50));
    request = server.request();
  }
  EXPECT_THAT(request, ::testing::StartsWith("GET /metrics HTTP/1.0\r\n"));
}

TEST(HttpGetTest, ErrorsNameTheUrl) {
  {
    OneShotServer server("HTTP/1.1 404 Not Found\r\n\r\nnope");
    auto got = HttpGet(server.address(), "/metrics", absl::Seconds(5));
    ASSERT_FALSE(got.ok());
    EXPECT_THAT(std::string(got.status().message()), ::testing::HasSubstr("HTTP status 404"));
  }
  {
    OneShotServer server("");
    auto got = HttpGet(server.address(), "/metrics", absl::Milliseconds(300));
    ASSERT_FALSE(got.ok());
    EXPECT_TRUE(absl::IsDeadlineExceeded(got.status())) << got.status();
  }
  auto refused = HttpGet("127.0.0.1:1", "/metrics", absl::Seconds(2));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              ::testing::HasSubstr("http://127.0.0.1:1/metrics"));
  EXPECT_FALSE(HttpGet("no-port", "/", absl::Seconds(1)).ok());
}

}  // namespace
}  // namespace tandem::client
