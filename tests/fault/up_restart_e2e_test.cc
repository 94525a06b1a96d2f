// `tandem up` supervises its cluster, tested through the `tandem up` binary itself
// (its own process management, tcp collectives, the bundled models):
//  * the draft worker SIGKILLed mid-stream: every stream completes token-identical to
//    target-only decoding, `up` restarts the draft, and later requests are speculative
//    again (proposals > 0); then the coordinator SIGKILLed: restarted, it serves again;
//  * a target follower SIGKILLed mid-stream (tp 2): the streams pause and resume
//    token-exact once `up` has restarted the rank (the whole stream is compared token by
//    token, so a duplicated or dropped streamed token fails);
//  * a draft worker that crashes at start every time: `up` gives up after its restart
//    budget, naming the process and quoting the end of its log;
//  * --restart never: the first death stops the cluster, as before supervision existed;
//  * in every case no process `up` started survives it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/child_process.h"
#include "tests/e2e/cluster.h"
#include "tests/fault/stream_recorder.h"

namespace tandem::fault {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct ProcessLine {
  std::string state;
  pid_t pid = 0;
  int restarts = 0;
};

// One `tandem up` run in its own directory under TEST_TMPDIR.
class UpRun {
 public:
  // `config` is the JSON cluster description; `flags` are added to the command line.
  UpRun(const std::string& tag, const std::string& config, std::vector<std::string> flags) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", tag);
    mkdir(dir_.c_str(), 0755);
    std::ofstream(dir_ + "/cluster.json") << config;
    client::ChildOptions o;
    o.binary = "client/tandem";
    o.args = {"up",
              "--config=" + dir_ + "/cluster.json",
              "--port=0",
              "--ready-file=" + ready_file(),
              "--log-dir=" + dir_ + "/logs",
              "--startup-timeout=120",
              "--coordinator-bin=coordinator/tandem-coordinator",
              "--worker-bin=worker/tandem-worker",
              "--restart-backoff=0.2"};
    o.args.insert(o.args.end(), flags.begin(), flags.end());
    o.log_path = out_path();
    auto child = client::ChildProcess::Spawn(o);
    EXPECT_TRUE(child.ok()) << child.status();
    if (child.ok()) up_ = *std::move(child);
  }
  ~UpRun() {
    if (up_ != nullptr) Stop();
  }

  std::string ready_file() const { return dir_ + "/ready"; }
  std::string out_path() const { return dir_ + "/up.out"; }
  std::string out() const { return ReadFile(out_path()); }
  std::string log(const std::string& name) const { return ReadFile(dir_ + "/logs/" + name); }
  const std::string& endpoint() const { return endpoint_; }

  // The processes of the ready file (empty until `up` is ready).
  std::map<std::string, ProcessLine> Processes() {
    std::map<std::string, ProcessLine> out;
    const std::string text = ReadFile(ready_file());
    std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
    if (!lines.empty()) endpoint_ = lines[0];
    static const std::regex kLine(R"(process=(\S+) state=(\S+) pid=(\d+) restarts=(\d+))");
    for (const std::string& line : lines) {
      std::smatch m;
      if (!std::regex_match(line, m, kLine)) continue;
      out[m[1]] = ProcessLine{m[2], std::stoi(m[3]), std::stoi(m[4])};
    }
    return out;
  }

  // Waits until `up` is ready and `pred` holds on its processes; false on timeout or
  // when `up` exits.
  bool WaitFor(const std::function<bool(const std::map<std::string, ProcessLine>&)>& pred,
               absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end && !up_->Poll()) {
      std::map<std::string, ProcessLine> p = Processes();
      if (!p.empty() && pred(p)) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }
  bool WaitAllServing(absl::Duration timeout) {
    return WaitFor(
        [](const std::map<std::string, ProcessLine>& p) {
          for (const auto& [name, line] : p) {
            if (line.state != "serving") return false;
          }
          return true;
        },
        timeout);
  }

  std::unique_ptr<v1::Tandem::Stub> Client() const {
    return v1::Tandem::NewStub(grpc::CreateChannel(endpoint_, grpc::InsecureChannelCredentials()));
  }

  // Waits for `up` to exit by itself; its exit code, or -1 after `timeout`.
  int WaitExit(absl::Duration timeout) {
    if (!up_->WaitFor(timeout)) return -1;
    return up_->exit_code();
  }
  // SIGTERM, then the exit code (-1: still running after 60 s, then killed).
  int Stop() {
    up_->Signal(SIGTERM);
    const int code = WaitExit(absl::Seconds(60));
    if (code == -1) up_->Signal(SIGKILL);
    return code;
  }

  // Pids of every process `up` started (it reports each start as "(pid N").
  std::vector<pid_t> StartedPids() const {
    std::vector<pid_t> pids;
    static const std::regex kStarted(R"(started \S+ \(pid (\d+))");
    const std::string text = out();
    for (std::sregex_iterator it(text.begin(), text.end(), kStarted), end; it != end; ++it) {
      pids.push_back(std::stoi((*it)[1]));
    }
    return pids;
  }

 private:
  std::string dir_;
  std::string endpoint_;
  std::unique_ptr<client::ChildProcess> up_;
};

// A process that still exists and is not a zombie.
bool Running(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  const std::string stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

void ExpectNoOrphans(const UpRun& up, size_t at_least) {
  const std::vector<pid_t> pids = up.StartedPids();
  EXPECT_GE(pids.size(), at_least) << up.out();
  for (pid_t pid : pids) EXPECT_FALSE(Running(pid)) << "pid " << pid << " outlived tandem up";
}

std::string Config(int tp, const std::string& draft_args, const std::string& target_args,
                   const std::string& coordinator_args) {
  return absl::StrCat(R"({"target": {"model": "models/target", "tp": )", tp,
                      R"(, "threads": 1, "args": [)", target_args,
                      R"(]}, "draft": {"model": "models/draft", "threads": 1, "args": [)",
                      draft_args, R"(]}, "coordinator": {"args": [)", coordinator_args, "]}}");
}

constexpr int kStreams = 3;
constexpr int kTokens = 96;

std::vector<std::unique_ptr<RecordedStream>> StartStreams(v1::Tandem::Stub* stub,
                                                          v1::SpeculationMethod method) {
  std::vector<std::unique_ptr<RecordedStream>> streams;
  for (const std::string& prompt : e2e::TestPrompts(kStreams)) {
    streams.push_back(std::make_unique<RecordedStream>(
        stub,
        GreedyRequest(prompt, kTokens, method, method == v1::SPECULATION_METHOD_NONE ? -1 : 3)));
  }
  return streams;
}

std::vector<std::vector<int>> Outputs(std::vector<std::unique_ptr<RecordedStream>>& streams) {
  std::vector<std::vector<int>> out;
  for (auto& s : streams) {
    s->Join();
    EXPECT_TRUE(s->status().ok()) << s->status().error_message();
    EXPECT_TRUE(s->finished());
    out.push_back(s->tokens());
  }
  return out;
}

TEST(UpRestartE2eTest, KilledDraftIsRestartedAndSpeculationResumes) {
  UpRun up("draft_kill", Config(1, "", "", ""), {});
  ASSERT_TRUE(up.WaitAllServing(absl::Seconds(120))) << up.out();
  auto stub = up.Client();
  auto target_only = StartStreams(stub.get(), v1::SPECULATION_METHOD_NONE);
  const std::vector<std::vector<int>> baseline = Outputs(target_only);
  ASSERT_EQ(baseline.size(), static_cast<size_t>(kStreams));
  ASSERT_EQ(baseline[0].size(), static_cast<size_t>(kTokens));

  const pid_t draft = up.Processes()["draft"].pid;
  auto streams = StartStreams(stub.get(), v1::SPECULATION_METHOD_DRAFT);
  ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << up.out();
  ASSERT_EQ(kill(draft, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  std::vector<int> at_kill;
  for (auto& s : streams) at_kill.push_back(s->tokens_received());
  const std::vector<std::vector<int>> after = Outputs(streams);
  const absl::Duration streams_done = absl::Now() - killed;
  uint64_t fallback_steps = 0;
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_LT(at_kill[i], kTokens) << "stream " << i << " was done before the kill";
    EXPECT_EQ(after[i], baseline[i]) << "stream " << i;
    fallback_steps += streams[i]->stats().fallback_steps();
  }
  EXPECT_GT(fallback_steps, 0u) << "no stream went on without the draft";

  // `up` restarts the draft; the coordinator re-adopts it.
  ASSERT_TRUE(up.WaitFor(
      [draft](const std::map<std::string, ProcessLine>& p) {
        const ProcessLine& d = p.at("draft");
        return d.state == "serving" && d.restarts == 1 && d.pid != draft;
      },
      absl::Seconds(60)))
      << up.out();
  const absl::Duration draft_back = absl::Now() - killed;
  uint64_t proposed = 0;
  const absl::Time end = absl::Now() + absl::Seconds(30);
  while (proposed == 0 && absl::Now() < end) {
    RecordedStream again(stub.get(), GreedyRequest(e2e::TestPrompts(1)[0], kTokens,
                                                   v1::SPECULATION_METHOD_DRAFT, 3));
    again.Join();
    ASSERT_TRUE(again.status().ok()) << again.status().error_message();
    EXPECT_EQ(again.tokens(), baseline[0]);
    proposed = again.stats().draft_tokens_proposed();
    if (proposed == 0) absl::SleepFor(absl::Milliseconds(500));
  }
  EXPECT_GT(proposed, 0u) << "no speculation after the draft came back\n"
                          << up.log("coordinator.log");
  std::printf(
      "draft killed: streams done after %.1f s, draft serving again after %.1f s, "
      "speculative again after %.1f s\n",
      absl::ToDoubleSeconds(streams_done), absl::ToDoubleSeconds(draft_back),
      absl::ToDoubleSeconds(absl::Now() - killed));

  const std::string out = up.out();
  EXPECT_THAT(out, HasSubstr(absl::StrCat("draft (pid ", draft, ") killed by signal 9")));
  EXPECT_THAT(out, HasSubstr("restarting it in 200ms (restart 1;"));
  EXPECT_THAT(out, HasSubstr("restarted draft (pid "));
  EXPECT_THAT(up.log("up.log"),
              HasSubstr(absl::StrCat("draft (pid ", draft, ") killed by signal 9")));
  EXPECT_THAT(up.log("up.prom"), HasSubstr("tandem_up_restarts_total{role=\"draft\"} 1\n"));
  EXPECT_THAT(up.log("up.prom"), HasSubstr("tandem_up_restarts_total{role=\"target\"} 0\n"));

  // The coordinator too: the requests it was running are lost (UNAVAILABLE, by design);
  // restarted on the same port, it serves new requests.
  const pid_t coordinator = up.Processes()["coordinator"].pid;
  {
    auto lost = StartStreams(stub.get(), v1::SPECULATION_METHOD_DRAFT);
    ASSERT_TRUE(WaitForTokens(lost, 4, absl::Seconds(60))) << up.out();
    ASSERT_EQ(kill(coordinator, SIGKILL), 0);
    for (auto& s : lost) {
      s->Join();
      EXPECT_EQ(s->status().error_code(), grpc::StatusCode::UNAVAILABLE)
          << s->status().error_message();
    }
  }
  ASSERT_TRUE(up.WaitFor(
      [](const std::map<std::string, ProcessLine>& p) {
        return p.at("coordinator").restarts == 1 && p.at("coordinator").state == "serving";
      },
      absl::Seconds(60)))
      << up.out();
  // A client retries UNAVAILABLE (its connection to the killed process may still be
  // cached: gRPC shares subchannels between the channels of a process).
  grpc::Status served_status;
  for (int attempt = 0; attempt < 5; ++attempt) {
    RecordedStream served(stub.get(), GreedyRequest(e2e::TestPrompts(1)[0], kTokens,
                                                    v1::SPECULATION_METHOD_DRAFT, 3));
    served.Join();
    served_status = served.status();
    if (served_status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      absl::SleepFor(absl::Milliseconds(200));
      continue;
    }
    EXPECT_EQ(served.tokens(), baseline[0]);
    break;
  }
  ASSERT_TRUE(served_status.ok()) << served_status.error_message() << "\n"
                                  << up.log("coordinator.log") << up.out();
  EXPECT_THAT(up.log("up.prom"), HasSubstr("tandem_up_restarts_total{role=\"coordinator\"} 1\n"));
  EXPECT_EQ(up.Stop(), 0) << up.out();
  ExpectNoOrphans(up, 5);  // Coordinator twice, target, draft twice.
}

TEST(UpRestartE2eTest, KilledFollowerIsRestartedAndStreamsResumeTokenExact) {
  UpRun up("follower_kill",
           Config(2, "",
                  R"("--step_timeout_s=3", "--heartbeat_s=0.5", "--leader_timeout_s=4",
                     "--regroup_timeout_s=4")",
                  R"("--step_timeout_s=10", "--target_recovery_timeout_s=40")"),
           {});
  ASSERT_TRUE(up.WaitAllServing(absl::Seconds(120))) << up.out();
  auto stub = up.Client();
  auto undisturbed = StartStreams(stub.get(), v1::SPECULATION_METHOD_DRAFT);
  const std::vector<std::vector<int>> baseline = Outputs(undisturbed);
  ASSERT_EQ(baseline.size(), static_cast<size_t>(kStreams));

  const pid_t follower = up.Processes()["target-1"].pid;
  auto streams = StartStreams(stub.get(), v1::SPECULATION_METHOD_DRAFT);
  ASSERT_TRUE(WaitForTokens(streams, 4, absl::Seconds(60))) << up.out();
  ASSERT_EQ(kill(follower, SIGKILL), 0);
  const absl::Time killed = absl::Now();
  std::vector<int> at_kill;
  for (auto& s : streams) at_kill.push_back(s->tokens_received());
  const std::vector<std::vector<int>> after = Outputs(streams);
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_LT(at_kill[i], kTokens) << "stream " << i << " was done before the kill";
    // Token for token: nothing repeated, nothing skipped.
    EXPECT_EQ(after[i], baseline[i]) << "stream " << i;
    EXPECT_GT(streams[i]->last_token_time(), killed);
  }
  std::printf("follower killed: all %d streams done %.1f s later\n", kStreams,
              absl::ToDoubleSeconds(absl::Now() - killed));
  ASSERT_TRUE(up.WaitFor(
      [](const std::map<std::string, ProcessLine>& p) {
        return p.at("target-1").restarts == 1 && p.at("target-1").state == "serving";
      },
      absl::Seconds(30)))
      << up.out();
  const std::string coordinator = up.log("coordinator.log");
  EXPECT_THAT(coordinator, HasSubstr("target group unavailable, pausing"));
  EXPECT_THAT(coordinator, HasSubstr("target group is back"));
  EXPECT_THAT(up.out(),
              HasSubstr(absl::StrCat("target-1 (pid ", follower, ") killed by signal 9")));
  EXPECT_THAT(up.log("up.prom"), HasSubstr("tandem_up_restarts_total{role=\"target\"} 1\n"));
  EXPECT_EQ(up.Stop(), 0) << up.out();
  ExpectNoOrphans(up, 5);
}

TEST(UpRestartE2eTest, CrashLoopGivesUpAfterTheBudgetWithTheLog) {
  const absl::Time start = absl::Now();
  UpRun up("crash_loop", Config(1, R"("--no_such_flag=1")", "", ""), {"--restart-budget=2"});
  const int code = up.WaitExit(absl::Seconds(90));
  const std::string out = up.out();
  ASSERT_EQ(code, 1) << out;
  std::printf("gave up %.1f s after the start\n", absl::ToDoubleSeconds(absl::Now() - start));
  EXPECT_THAT(out, HasSubstr("cluster failed to start: draft (pid "));
  EXPECT_THAT(out, HasSubstr("restart budget exhausted: restarted 2 times within 1m"));
  EXPECT_THAT(out, HasSubstr("/logs/draft.log:"));
  EXPECT_THAT(out, HasSubstr("no_such_flag"));  // The worker's own complaint, quoted.
  EXPECT_THAT(out, HasSubstr("restarted draft (pid "));
  EXPECT_FALSE(absl::StrContains(out, "Tandem is serving"));
  // The first two starts' complaints are kept in the log with a separator.
  EXPECT_THAT(up.log("draft.log"), HasSubstr("--- tandem up: restarting draft"));
  ExpectNoOrphans(up, 5);  // Coordinator, target, draft three times.
}

TEST(UpRestartE2eTest, RestartNeverStopsTheClusterAtTheFirstDeath) {
  UpRun up("never", Config(1, "", "", ""), {"--restart=never"});
  ASSERT_TRUE(up.WaitAllServing(absl::Seconds(120))) << up.out();
  const pid_t draft = up.Processes()["draft"].pid;
  ASSERT_EQ(kill(draft, SIGKILL), 0);
  EXPECT_EQ(up.WaitExit(absl::Seconds(60)), 1) << up.out();
  EXPECT_THAT(up.out(), HasSubstr(absl::StrCat("giving up: draft (pid ", draft,
                                               ") killed by signal 9 (Killed); not restarted: "
                                               "the restart policy is 'never'")));
  ExpectNoOrphans(up, 3);
}

}  // namespace
}  // namespace tandem::fault
