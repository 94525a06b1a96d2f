// Facts about this machine and about processes, for benchmark reports.
#ifndef TANDEM_CLIENT_MACHINE_INFO_H_
#define TANDEM_CLIENT_MACHINE_INFO_H_

#include <sys/types.h>

#include <optional>
#include <string>

namespace tandem::client {

struct MachineInfo {
  std::string hostname;
  std::string kernel;     // uname -sr
  std::string cpu_model;  // /proc/cpuinfo "model name" ("" when unknown)
  int online_cpus = 0;    // sysconf(_SC_NPROCESSORS_ONLN)
  int allowed_cpus = 0;   // Cores this process may run on.
  double memory_gib = 0;  // MemTotal.
};

MachineInfo GetMachineInfo();

// Resident set size of process `pid` in KiB (VmRSS), nullopt when it is gone.
std::optional<long> ResidentKib(pid_t pid);

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_MACHINE_INFO_H_
