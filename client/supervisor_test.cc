#include "client/supervisor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tandem::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Processes as plain data: a test kills them, makes them healthy, counts respawns.
class FakeTable : public ProcessTable {
 public:
  struct Proc {
    std::string name;
    pid_t pid = 0;
    bool dead = false;
    bool healthy = false;
    std::string how = "running";
    int respawns = 0;
  };
  explicit FakeTable(std::vector<std::string> names) {
    for (const std::string& n : names) procs.push_back(Proc{n, next_pid++});
  }
  size_t size() const override { return procs.size(); }
  std::string name(size_t i) const override { return procs[i].name; }
  pid_t pid(size_t i) const override { return procs[i].pid; }
  bool Exited(size_t i) override { return procs[i].dead; }
  std::string ExitDescription(size_t i) const override { return procs[i].how; }
  std::string LogPath(size_t i) const override { return "/logs/" + procs[i].name + ".log"; }
  std::string LogTail(size_t i) const override { return "line 1\nbad flag --x"; }
  absl::Status Probe(size_t i) override {
    return procs[i].healthy ? absl::OkStatus() : absl::UnavailableError("connection refused");
  }
  absl::Status Respawn(size_t i) override {
    if (!procs[i].dead) return absl::InternalError("respawn of a live process");
    if (fail_respawn) return absl::NotFoundError("cannot execute /bin/x");
    procs[i] = Proc{procs[i].name,      next_pid++, false,
                    healthy_on_respawn, "running",  procs[i].respawns + 1};
    return absl::OkStatus();
  }
  void Kill(size_t i, const std::string& how = "killed by signal 9 (Killed)") {
    procs[i].dead = true;
    procs[i].healthy = false;
    procs[i].how = how;
  }

  std::vector<Proc> procs;
  pid_t next_pid = 100;
  bool healthy_on_respawn = true;
  bool fail_respawn = false;
};

RestartPolicy Policy() {
  RestartPolicy p;
  p.budget = 2;
  p.window = absl::Seconds(60);
  p.backoff = absl::Seconds(1);
  p.max_backoff = absl::Seconds(8);
  return p;
}

const absl::Time kT0 = absl::FromUnixSeconds(5000);

struct Harness {
  explicit Harness(RestartPolicy p = Policy())
      : table({"coordinator", "target-0", "target-1", "draft"}),
        sup(&table, p, [this](const std::string& l) { notes.push_back(l); }) {}
  FakeTable table;
  std::vector<std::string> notes;
  Supervisor sup;
};

TEST(SupervisorTest, ProbesUntilEveryProcessServes) {
  Harness h;
  EXPECT_TRUE(h.sup.Step(kT0).ok());
  EXPECT_FALSE(h.sup.AllServing());
  EXPECT_THAT(h.sup.NotServing(), ::testing::Contains("draft (connection refused)"));
  for (auto& p : h.table.procs) p.healthy = true;
  EXPECT_TRUE(h.sup.Step(kT0 + absl::Seconds(1)).ok());
  EXPECT_TRUE(h.sup.AllServing());
  EXPECT_THAT(h.notes, ::testing::ElementsAre("coordinator is healthy", "target-0 is healthy",
                                              "target-1 is healthy", "draft is healthy"));
  EXPECT_TRUE(h.sup.TakeChanged());
  EXPECT_FALSE(h.sup.TakeChanged());
}

TEST(SupervisorTest, DeadWorkerIsRestartedAfterItsBackoffAndServesAgain) {
  Harness h;
  for (auto& p : h.table.procs) p.healthy = true;
  ASSERT_TRUE(h.sup.Step(kT0).ok());
  h.sup.TakeChanged();
  h.notes.clear();
  h.table.Kill(3);
  ASSERT_TRUE(h.sup.Step(kT0 + absl::Seconds(10)).ok());
  EXPECT_TRUE(h.sup.TakeChanged());
  EXPECT_EQ(h.sup.Status()[3].state, ProcessState::kBackoff);
  ASSERT_EQ(h.notes.size(), 1u);
  EXPECT_THAT(h.notes[0], AllOf(HasSubstr("draft (pid 103) killed by signal 9"),
                                HasSubstr("restarting it in 1s"), HasSubstr("restart 1;")));
  // Not before the backoff has passed.
  ASSERT_TRUE(h.sup.Step(kT0 + absl::Seconds(10.5)).ok());
  EXPECT_EQ(h.table.procs[3].respawns, 0);
  ASSERT_TRUE(h.sup.Step(kT0 + absl::Seconds(11)).ok());
  EXPECT_EQ(h.table.procs[3].respawns, 1);
  EXPECT_EQ(h.sup.Status()[3].state, ProcessState::kStarting);
  EXPECT_EQ(h.sup.Status()[3].pid, 104);
  EXPECT_THAT(h.notes.back(), HasSubstr("restarted draft (pid 104, restart 1)"));
  ASSERT_TRUE(h.sup.Step(kT0 + absl::Seconds(12)).ok());
  EXPECT_TRUE(h.sup.AllServing());
  EXPECT_EQ(h.sup.Status()[3].restarts, 1);
  EXPECT_EQ(h.sup.Status()[3].last_exit, "killed by signal 9 (Killed)");
  EXPECT_EQ(h.sup.Status()[0].restarts, 0);
}

TEST(SupervisorTest, CrashLoopBacksOffThenGivesUpNamingTheProcessAndItsLog) {
  Harness h;
  h.table.healthy_on_respawn = false;
  absl::Time now = kT0;
  std::vector<absl::Duration> delays;
  absl::Status last;
  for (int round = 0; round < 100 && last.ok(); ++round) {
    if (!h.table.procs[1].dead) h.table.Kill(1, "exited with code 2");
    last = h.sup.Step(now);
    now += absl::Milliseconds(250);
  }
  ASSERT_TRUE(absl::IsFailedPrecondition(last)) << last;
  EXPECT_EQ(h.table.procs[1].respawns, 2);  // The budget.
  const std::string m(last.message());
  EXPECT_THAT(m, AllOf(HasSubstr("target-0 (pid "), HasSubstr("exited with code 2"),
                       HasSubstr("restart budget exhausted: restarted 2 times within 1m"),
                       HasSubstr("last lines of /logs/target-0.log:\n  line 1\n  bad flag --x")));
  EXPECT_EQ(h.sup.Status()[1].state, ProcessState::kFailed);
  // Backoff doubled: the second restart came 2 s after the second death, not 1 s.
  EXPECT_THAT(h.notes, ::testing::Contains(HasSubstr("restarting it in 2s")));
}

TEST(SupervisorTest, NeverAndWorkersModesGiveUpAtOnce) {
  RestartPolicy never = Policy();
  never.mode = RestartMode::kNever;
  Harness h(never);
  h.table.Kill(2);
  absl::Status s = h.sup.Step(kT0);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not restarted: the restart policy is 'never'"));

  RestartPolicy workers = Policy();
  workers.mode = RestartMode::kWorkers;
  Harness w(workers);
  w.table.Kill(3);
  EXPECT_TRUE(w.sup.Step(kT0).ok());  // The draft is a worker.
  w.table.Kill(0);
  s = w.sup.Step(kT0 + absl::Seconds(1));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'workers' does not restart the coordinator"));
}

TEST(SupervisorTest, CoordinatorIsRestartedByDefault) {
  Harness h;
  h.table.Kill(0, "exited with code 1");
  ASSERT_TRUE(h.sup.Step(kT0).ok());
  ASSERT_TRUE(h.sup.Step(kT0 + absl::Seconds(1)).ok());
  EXPECT_EQ(h.table.procs[0].respawns, 1);
}

TEST(SupervisorTest, FailedRespawnGivesUp) {
  Harness h;
  h.table.fail_respawn = true;
  h.table.Kill(3);
  ASSERT_TRUE(h.sup.Step(kT0).ok());
  absl::Status s = h.sup.Step(kT0 + absl::Seconds(2));
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot restart draft: cannot execute /bin/x"));
}

TEST(SupervisorTest, StatusLinesAndMetrics) {
  Harness h;
  for (auto& p : h.table.procs) p.healthy = true;
  ASSERT_TRUE(h.sup.Step(kT0).ok());
  h.table.Kill(2);
  ASSERT_TRUE(h.sup.Step(kT0 + absl::Seconds(1)).ok());
  const std::vector<ProcessStatus> status = h.sup.Status();
  EXPECT_EQ(FormatProcessLines(status),
            "process=coordinator state=serving pid=100 restarts=0\n"
            "process=target-0 state=serving pid=101 restarts=0\n"
            "process=target-1 state=restarting pid=102 restarts=1\n"
            "process=draft state=serving pid=103 restarts=0\n");
  const std::string metrics = FormatSupervisorMetrics(status);
  EXPECT_THAT(metrics, HasSubstr("# TYPE tandem_up_restarts_total counter\n"
                                 "tandem_up_restarts_total{role=\"coordinator\"} 0\n"
                                 "tandem_up_restarts_total{role=\"draft\"} 0\n"
                                 "tandem_up_restarts_total{role=\"target\"} 1\n"));
  EXPECT_THAT(metrics,
              HasSubstr("tandem_up_process_serving{process=\"target-1\",role=\"target\"} 0\n"));
  EXPECT_THAT(metrics,
              HasSubstr("tandem_up_process_serving{process=\"draft\",role=\"draft\"} 1\n"));
  EXPECT_EQ(RoleOfProcess("target-12"), "target");
}

}  // namespace
}  // namespace tandem::client
