#include "client/machine_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/cpu_set.h"

namespace tandem::client {
namespace {

// The value after "KEY:" in a /proc file, trimmed; "" when absent.
std::string ProcField(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, key)) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "";
}

// Leading integer of "12345 kB".
std::optional<long> LeadingNumber(const std::string& text) {
  const size_t space = text.find(' ');
  long value = 0;
  if (!absl::SimpleAtoi(text.substr(0, space), &value)) return std::nullopt;
  return value;
}

}  // namespace

MachineInfo GetMachineInfo() {
  MachineInfo info;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) info.hostname = host;
  utsname u;
  if (uname(&u) == 0) info.kernel = absl::StrCat(u.sysname, " ", u.release);
  info.cpu_model = ProcField("/proc/cpuinfo", "model name");
  info.online_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.allowed_cpus = static_cast<int>(AllowedCpus().size());
  if (auto kib = LeadingNumber(ProcField("/proc/meminfo", "MemTotal"))) {
    info.memory_gib = static_cast<double>(*kib) / (1024.0 * 1024.0);
  }
  return info;
}

std::optional<long> ResidentKib(pid_t pid) {
  const std::string value = ProcField(absl::StrCat("/proc/", pid, "/status"), "VmRSS");
  if (value.empty()) return std::nullopt;
  return LeadingNumber(value);
}

}  // namespace tandem::client
