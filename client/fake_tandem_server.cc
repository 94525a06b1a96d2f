// A tandem.v1.Tandem server backed by FakeTandemService, for CLI tests without models.
// Usage: fake_tandem_server PORT_FILE [TOKEN_DELAY_MS]
// Writes "127.0.0.1:PORT" to PORT_FILE once serving; exits on SIGTERM/SIGINT.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "client/fake_tandem_service.h"
#include "common/server.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fake_tandem_server PORT_FILE [TOKEN_DELAY_MS]\n");
    return 2;
  }
  tandem::InstallShutdownSignalHandlers();
  const int delay_ms = argc > 2 ? std::atoi(argv[2]) : 5;
  tandem::client::testing::FakeTandemService service(absl::Milliseconds(delay_ms));
  tandem::ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  auto server = tandem::GrpcServer::Start(options, {&service});
  if (!server.ok()) {
    std::fprintf(stderr, "fake_tandem_server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  (*server)->SetServing(true);
  {
    const std::string temp = std::string(argv[1]) + ".tmp";
    std::ofstream(temp) << "127.0.0.1:" << (*server)->port() << "\n";
    std::rename(temp.c_str(), argv[1]);
  }
  tandem::WaitForShutdownSignal();
  (*server)->Shutdown(absl::Seconds(1));
  return 0;
}
