// Measures collective latency with N ranks in one process (one thread and one
// communicator per rank; gloo ranks talk TCP over loopback). Prints, per message size,
// the median / mean / p99 time of one call on rank 0, for the deterministic
// AllReduceSum (all-gather + rank-order sum), its AllGather part alone, and gloo's own
// ring all-reduce (not order-deterministic) for comparison.
//
//   bazel run //comm:comm_bench -- --ranks=4 --counts=1,4096,65536,1048576 --iters=200
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "comm/gloo_communicator.h"
#include "comm/local_communicator.h"
#include "comm/store.h"

ABSL_FLAG(int, ranks, 4, "ranks (threads) in the group");
ABSL_FLAG(std::string, counts, "1,4096,65536,1048576", "floats per call, comma-separated");
ABSL_FLAG(int, iters, 200, "timed calls per size (after 20 warm-up calls)");
ABSL_FLAG(std::string, backends, "gloo,local", "backends to measure");

namespace tandem {
namespace {

struct Stats {
  double median_us, mean_us, p99_us;
};

Stats Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double v : us) sum += v;
  return {us[us.size() / 2], sum / us.size(),
          us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

// Runs op(rank, iteration) on every rank's thread; returns rank 0's per-call times.
std::vector<double> TimeOnRanks(int ranks, int iters,
                                const std::function<void(int, int)>& op) {
  std::vector<double> rank0;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < 20; ++i) op(r, i);
      for (int i = 0; i < iters; ++i) {
        absl::Time start = absl::Now();
        op(r, i);
        if (r == 0) rank0.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      }
    });
  }
  for (auto& t : threads) t.join();
  return rank0;
}

void Print(const char* backend, const char* what, int ranks, size_t count, const Stats& s) {
  std::printf("%-6s %-28s ranks=%d floats=%-8zu median=%9.1f us  mean=%9.1f us  p99=%9.1f us\n",
              backend, what, ranks, count, s.median_us, s.mean_us, s.p99_us);
}

std::vector<std::unique_ptr<Communicator>> Connect(const std::string& backend, int ranks) {
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(ranks));
  if (backend == "local") {
    comms = *LocalGroup::Create(ranks);
    return comms;
  }
  InMemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = CreateGlooCommunicator(r, ranks, store, GlooOptions());
      if (!comm.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, comm.status().ToString().c_str());
        std::exit(1);
      }
      comms[r] = *std::move(comm);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

// gloo's own ring all-reduce, for comparison.
void NativeGlooAllReduce(int ranks, const std::vector<size_t>& counts, int iters) {
  gloo::rendezvous::HashStore store;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
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
    auto times = TimeOnRanks(ranks, iters, [&](int r, int) {
      gloo::AllreduceOptions options(contexts[r]);
      options.setOutput(data[r].data(), count);
      options.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(options);
    });
    Print("gloo", "native ring allreduce", ranks, count, Summarize(times));
  }
}

int Main() {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::vector<size_t> counts;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_counts), ',')) {
    size_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n == 0) {
      std::fprintf(stderr, "bad --counts entry '%s'\n", std::string(part).c_str());
      return 2;
    }
    counts.push_back(n);
  }
  std::printf("comm_bench: %d ranks as threads, %u hardware threads, %d calls per size\n",
              ranks, std::thread::hardware_concurrency(), iters);
  const absl::Duration timeout = absl::Seconds(30);
  for (absl::string_view backend : absl::StrSplit(absl::GetFlag(FLAGS_backends), ',')) {
    std::string name(backend);
    auto comms = Connect(name, ranks);
    for (size_t count : counts) {
      std::vector<std::vector<float>> data(static_cast<size_t>(ranks),
                                           std::vector<float>(count, 1.0f));
      std::vector<std::vector<float>> gathered(static_cast<size_t>(ranks),
                                               std::vector<float>(count * ranks));
      auto reduce = TimeOnRanks(ranks, iters, [&](int r, int) {
        std::fill(data[r].begin(), data[r].end(), 1.0f);
        if (!comms[r]->AllReduceSum(data[r].data(), count, timeout).ok()) std::exit(1);
      });
      Print(name.c_str(), "AllReduceSum (deterministic)", ranks, count, Summarize(reduce));
      auto gather = TimeOnRanks(ranks, iters, [&](int r, int) {
        if (!comms[r]->AllGather(data[r].data(), gathered[r].data(), count * sizeof(float),
                                 timeout)
                 .ok()) {
          std::exit(1);
        }
      });
      Print(name.c_str(), "AllGather (same floats)", ranks, count, Summarize(gather));
    }
    auto barrier = TimeOnRanks(ranks, iters, [&](int r, int) {
      if (!comms[r]->Barrier(timeout).ok()) std::exit(1);
    });
    Print(name.c_str(), "Barrier", ranks, 0, Summarize(barrier));
  }
  NativeGlooAllReduce(ranks, counts, iters);
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
