// tandem: the command-line client and local launcher of a Tandem cluster.
//   tandem generate   stream a completion
//   tandem up         start a local cluster
//   tandem bench      benchmark a server
//   tandem quantize   write a q8_0 or q4_0 copy of a model directory
//   tandem health     check a server's health (container probes)
//   tandem info       show a server's models, limits, stop ids and sampling defaults
//   tandem synth      write a random-weight model directory of a real shape (benchmarks)
#include "client/bench_command.h"
#include "client/command.h"
#include "client/generate_command.h"
#include "client/health_command.h"
#include "client/info_command.h"
#include "client/quantize_command.h"
#include "client/synth_command.h"
#include "client/up_command.h"

int main(int argc, char** argv) {
  using namespace tandem::client;
  return RunCli({GenerateCommand(), UpCommand(), BenchCommand(), QuantizeCommand(), SynthCommand(),
                 HealthCommand(), InfoCommand()},
                argc, argv);
}
