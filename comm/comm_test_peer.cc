// One rank of a multi-process collective test, started by multiprocess_test.cc.
// Connects through the factory (--comm_* flags; --comm_backend gloo or tcp) and then,
// by --mode:
//   checks         runs the collective checks; exit 0 when all pass, 1 otherwise.
//   hang           signals ready, then sleeps (the test kills it).
//   until_failure  signals ready, then all-reduces (each call bounded by
//                  --call_timeout_s) until a call fails; exit 3 when it fails with
//                  UNAVAILABLE, 6 with DEADLINE_EXCEEDED, 4 for another error, 5 when
//                  nothing failed within --max_seconds.
// Readiness is the key "ready/<rank>" set in the rendezvous store.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "comm/collective_checks.h"
#include "comm/comm_flags.h"
#include "comm/factory.h"

ABSL_FLAG(std::string, mode, "checks", "checks, hang or until_failure");
ABSL_FLAG(int, rank, 0, "rank of this process");
ABSL_FLAG(int, size, 1, "ranks in the group");
ABSL_FLAG(std::string, run_id, "", "run id (key prefix)");
ABSL_FLAG(int, max_seconds, 20, "until_failure: give up after this long");
ABSL_FLAG(double, call_timeout_s, 3, "until_failure: timeout of each all-reduce");

namespace tandem {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "peer rank %d: FAILED: %s\n", rank, what.c_str());
  return 1;
}

// The same checks as collective_checks, for a process that holds one rank.
int RunChecks(Communicator& comm) {
  const int rank = comm.rank(), size = comm.size();
  for (size_t count : {size_t{1}, size_t{4096}, size_t{100003}}) {
    std::vector<float> x = testing::MakeRankInput(rank, count, 7);
    absl::Status status = comm.AllReduceSum(x.data(), count, kTimeout);
    if (!status.ok()) return Fail(rank, status.ToString());
    if (!testing::BitwiseEqual(x, testing::NaiveRankOrderSum(size, count, 7))) {
      return Fail(rank, absl::StrCat("AllReduceSum(", count, ") is not the rank-order sum"));
    }
  }
  const size_t batch = 10000;
  std::vector<float> batched = testing::MakeRankInput(rank, batch, 8);
  if (!comm.AllReduceSum(batched.data(), batch, kTimeout).ok()) return Fail(rank, "batch");
  for (size_t probe : {size_t{0}, size_t{4321}, batch - 1}) {
    float alone = testing::MakeRankInput(rank, batch, 8)[probe];
    if (!comm.AllReduceSum(&alone, 1, kTimeout).ok()) return Fail(rank, "alone");
    if (std::memcmp(&alone, &batched[probe], sizeof(float)) != 0) {
      return Fail(rank, absl::StrCat("element ", probe, " differs alone vs batched"));
    }
  }
  const size_t bytes = 5000;
  std::vector<char> in(bytes), out(bytes * size);
  for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<char>(rank * 31 + i);
  if (!comm.AllGather(in.data(), out.data(), bytes, kTimeout).ok()) return Fail(rank, "gather");
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < bytes; ++i) {
      if (out[r * bytes + i] != static_cast<char>(r * 31 + i)) {
        return Fail(rank, absl::StrCat("AllGather byte ", i, " of rank ", r));
      }
    }
  }
  for (int root = 0; root < size; ++root) {
    std::vector<char> data(bytes, static_cast<char>(rank));
    if (!comm.Broadcast(data.data(), bytes, root, kTimeout).ok()) return Fail(rank, "bcast");
    if (data != std::vector<char>(bytes, static_cast<char>(root))) {
      return Fail(rank, absl::StrCat("Broadcast from ", root));
    }
  }
  if (!comm.Barrier(kTimeout).ok()) return Fail(rank, "barrier");
  std::printf("peer rank %d of %d: all checks passed\n", rank, size);
  return 0;
}

int Main() {
  CommOptions options = CommOptionsFromFlags();
  if (options.backend != "gloo" && options.backend != "tcp") {
    return Fail(options.rank, "--comm_backend must be gloo or tcp");
  }
  options.rank = absl::GetFlag(FLAGS_rank);
  options.size = absl::GetFlag(FLAGS_size);
  options.run_id = absl::GetFlag(FLAGS_run_id);
  options.connect_timeout = absl::Seconds(15);
  auto comm = CreateCommunicator(options);
  if (!comm.ok()) return Fail(options.rank, comm.status().ToString());
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "checks") return RunChecks(**comm);

  if (absl::Status s = (*comm)->Barrier(kTimeout); !s.ok()) return Fail(options.rank, s.ToString());
  auto store = OpenRendezvousStore(options);
  if (!store.ok()) return Fail(options.rank, store.status().ToString());
  if (absl::Status s = (*store)->Set(absl::StrCat("ready/", options.rank), "1"); !s.ok()) {
    return Fail(options.rank, s.ToString());
  }
  if (mode == "hang") {
    absl::SleepFor(absl::Seconds(60));
    return 0;
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_max_seconds));
  std::vector<float> x(4096, 1.0f);
  while (absl::Now() < give_up) {
    absl::Status s = (*comm)->AllReduceSum(x.data(), x.size(),
                                           absl::Seconds(absl::GetFlag(FLAGS_call_timeout_s)));
    if (!s.ok()) {
      std::printf("peer rank %d: failed as expected: %s\n", options.rank, s.ToString().c_str());
      if (absl::IsUnavailable(s)) return 3;
      return absl::IsDeadlineExceeded(s) ? 6 : 4;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return 5;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return tandem::Main();
}
