// Measures collective latency of N ranks: by default one process with one thread and
// one communicator per rank; with --processes, one forked process per rank meeting
// through a file store (the deployment shape: what matters there is how a waiting rank
// waits, and pinning every rank to one core, e.g. `taskset -c 0 comm_bench
// --processes`, shows the cost of busy-polling). Prints, per backend and message size,
// the median / mean / p99 time of one call on rank 0 for the deterministic
// AllReduceSum (all-gather + rank-order sum), its AllGather part alone, and Barrier;
// in thread mode also gloo's own ring all-reduce (not order-deterministic).
//
//   bazel run //comm:comm_bench -- --ranks=4 --counts=1,4096,65536,1048576 --iters=200
//   taskset -c 0 bazel-bin/comm/comm_bench --processes --ranks=2 --counts=1280
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "comm/file_store.h"
#include "comm/gloo_communicator.h"
#include "comm/local_communicator.h"
#include "comm/store.h"
#include "comm/tcp_mesh_communicator.h"

ABSL_FLAG(int, ranks, 4, "ranks in the group");
ABSL_FLAG(std::string, counts, "1,4096,65536,1048576", "floats per call, comma-separated");
ABSL_FLAG(int, iters, 200, "timed calls per size (after 20 warm-up calls)");
ABSL_FLAG(std::string, backends, "tcp,gloo,local",
          "backends to measure (local only without --processes)");
ABSL_FLAG(bool, processes, false,
          "one forked process per rank (rendezvous through a file store in /tmp) instead of "
          "one thread per rank");
ABSL_FLAG(bool, native_gloo, true, "thread mode: also time gloo's own ring all-reduce");

namespace tandem {
namespace {

struct Stats {
  double median_us, mean_us, p99_us;
};

Stats Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  return {us[us.size() / 2], sum / us.size(), us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

// Runs op(rank) `iters` times (after 20 warm-up calls) for each rank in `local`, each
// on its own thread; returns rank 0's per-call times (empty when rank 0 is elsewhere).
std::vector<double> TimeOnRanks(const std::vector<int>& local, int iters,
                                const std::function<void(int)>& op) {
  std::vector<double> rank0;
  std::vector<std::thread> threads;
  for (int r : local) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < 20; ++i) op(r);
      for (int i = 0; i < iters; ++i) {
        absl::Time start = absl::Now();
        op(r);
        if (r == 0) rank0.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      }
    });
  }
  for (auto& t : threads) t.join();
  return rank0;
}

void Print(const std::string& backend, const char* what, int ranks, size_t count,
           const std::vector<double>& times) {
  if (times.empty()) return;
  const Stats s = Summarize(times);
  std::printf("%-6s %-28s ranks=%d floats=%-8zu median=%9.1f us  mean=%9.1f us  p99=%9.1f us\n",
              backend.c_str(), what, ranks, count, s.median_us, s.mean_us, s.p99_us);
  std::fflush(stdout);
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "comm_bench: %s\n", what.c_str());
  std::exit(1);
}

// Communicators of the ranks in `local` (other elements null), connected through
// `store` (shared by all ranks of all processes).
std::vector<std::unique_ptr<Communicator>> Connect(const std::string& backend, int ranks,
                                                   const std::vector<int>& local,
                                                   std::shared_ptr<Store> base) {
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(ranks));
  if (backend == "local") {
    auto group = LocalGroup::Create(ranks);
    if (!group.ok()) Die(group.status().ToString());
    return *std::move(group);
  }
  PrefixStore store(std::move(base), backend);
  std::vector<std::thread> threads;
  for (int r : local) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm;
      if (backend == "gloo") {
        comm = CreateGlooCommunicator(r, ranks, store, GlooOptions());
      } else if (backend == "tcp") {
        TcpMeshOptions options;
        options.run_id = "comm_bench";
        comm = CreateTcpMeshCommunicator(r, ranks, store, options);
      } else {
        Die(absl::StrCat("unknown backend '", backend, "'"));
      }
      if (!comm.ok()) Die(absl::StrCat("rank ", r, ": ", comm.status().ToString()));
      comms[r] = *std::move(comm);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

// gloo's own ring all-reduce (thread mode), for comparison.
void NativeGlooAllReduce(int ranks, const std::vector<size_t>& counts, int iters) {
  gloo::rendezvous::HashStore store;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  std::vector<int> all;
  for (int r = 0; r < ranks; ++r) all.push_back(r);
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      gloo::transport::tcp::attr attr("127.0.0.1");
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(r, ranks);
      context->connectFullMesh(store, device);
      contexts[r] = context;
    });
  }
  for (auto& t : threads) t.join();
  for (size_t count : counts) {
    std::vector<std::vector<float>> data(static_cast<size_t>(ranks), std::vector<float>(count, 1));
    auto times = TimeOnRanks(all, iters, [&](int r) {
      gloo::AllreduceOptions options(contexts[r]);
      options.setOutput(data[r].data(), count);
      options.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(options);
    });
    Print("gloo", "native ring allreduce", ranks, count, times);
  }
}

// Measures every backend for the ranks in `local`; rank 0 prints.
void Measure(int ranks, const std::vector<int>& local, const std::vector<size_t>& counts, int iters,
             const std::vector<std::string>& backends, std::shared_ptr<Store> store) {
  const absl::Duration timeout = absl::Seconds(60);
  for (const std::string& name : backends) {
    auto comms = Connect(name, ranks, local, store);
    for (size_t count : counts) {
      std::vector<std::vector<float>> data(static_cast<size_t>(ranks));
      std::vector<std::vector<float>> gathered(static_cast<size_t>(ranks));
      for (int r : local) {
        data[r].assign(count, 1.0f);
        gathered[r].assign(count * ranks, 0.0f);
      }
      auto reduce = TimeOnRanks(local, iters, [&](int r) {
        std::fill(data[r].begin(), data[r].end(), 1.0f);
        absl::Status s = comms[r]->AllReduceSum(data[r].data(), count, timeout);
        if (!s.ok()) Die(s.ToString());
      });
      Print(name, "AllReduceSum (deterministic)", ranks, count, reduce);
      auto gather = TimeOnRanks(local, iters, [&](int r) {
        absl::Status s =
            comms[r]->AllGather(data[r].data(), gathered[r].data(), count * sizeof(float), timeout);
        if (!s.ok()) Die(s.ToString());
      });
      Print(name, "AllGather (same floats)", ranks, count, gather);
    }
    auto barrier = TimeOnRanks(local, iters, [&](int r) {
      absl::Status s = comms[r]->Barrier(timeout);
      if (!s.ok()) Die(s.ToString());
    });
    Print(name, "Barrier", ranks, 0, barrier);
  }
}

int Main() {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const int iters = absl::GetFlag(FLAGS_iters);
  const bool processes = absl::GetFlag(FLAGS_processes);
  if (ranks < 1 || iters < 1) Die("--ranks and --iters must be positive");
  std::vector<size_t> counts;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_counts), ',')) {
    size_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n == 0) {
      Die(absl::StrCat("bad --counts entry '", part, "'"));
    }
    counts.push_back(n);
  }
  std::vector<std::string> backends;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_backends), ',')) {
    if (processes && b == "local") continue;  // in-process only
    backends.emplace_back(b);
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof(allowed), &allowed);
  std::printf(
      "comm_bench: %d ranks as %s, %u hardware threads, %d allowed CPU(s), %d calls "
      "per size\n",
      ranks, processes ? "processes" : "threads", std::thread::hardware_concurrency(),
      CPU_COUNT(&allowed), iters);
  if (!processes) {
    std::vector<int> all;
    for (int r = 0; r < ranks; ++r) all.push_back(r);
    Measure(ranks, all, counts, iters, backends, std::make_shared<InMemoryStore>());
    if (absl::GetFlag(FLAGS_native_gloo)) NativeGlooAllReduce(ranks, counts, iters);
    return 0;
  }
  // Fork before any thread exists; each process opens the store itself.
  auto fresh = FileStore::CreateFresh("/tmp");
  if (!fresh.ok()) Die(fresh.status().ToString());
  const std::string directory = (*fresh)->directory();
  std::vector<pid_t> children;
  int rank = 0;
  for (int r = 1; r < ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) {
      rank = r;
      children.clear();
      break;
    }
    children.push_back(pid);
  }
  auto store = FileStore::Open(directory);
  if (!store.ok()) Die(store.status().ToString());
  Measure(ranks, {rank}, counts, iters, backends, std::shared_ptr<Store>(*std::move(store)));
  if (rank != 0) std::_Exit(0);
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::error_code ignored;
  std::filesystem::remove_all(directory, ignored);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
