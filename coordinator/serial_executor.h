// Runs tasks one at a time, in submission order, on a dedicated thread, and accounts
// the time spent running them. The coordinator gives each worker one executor: calls
// to a worker never overlap each other, while calls to different workers (draft and
// target) overlap freely, which is what pipelining needs.
#ifndef TANDEM_COORDINATOR_SERIAL_EXECUTOR_H_
#define TANDEM_COORDINATOR_SERIAL_EXECUTOR_H_

#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem::coordinator {

class SerialExecutor {
 public:
  explicit SerialExecutor(std::string name);
  // Runs the tasks already submitted, then joins the thread.
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // Queues `fn` and returns a future for its result.
  template <typename Fn>
  auto Submit(Fn fn) -> std::future<std::invoke_result_t<Fn>> {
    using Result = std::invoke_result_t<Fn>;
    // The task's time is added to busy_time() before its future becomes ready (the
    // guard's destructor runs after `fn` returns and before the result is stored).
    auto timed = [this, fn = std::move(fn)]() mutable -> Result {
      BusyGuard guard(this);
      return fn();
    };
    auto task = std::make_shared<std::packaged_task<Result()>>(std::move(timed));
    std::future<Result> future = task->get_future();
    Enqueue([task] { (*task)(); });
    return future;
  }

  // Runs `fn` on the calling thread, in submission order with the queued tasks (after
  // every task submitted before it; tasks submitted meanwhile wait for it), and accounts
  // its time like a task's. Saves the hand-off to the executor's thread (a thread
  // wake-up each way) on a call the caller would only wait for.
  template <typename Fn>
  auto RunHere(Fn fn) -> std::invoke_result_t<Fn> {
    BeginInline();
    struct End {
      SerialExecutor* executor;
      ~End() { executor->EndInline(); }
    } end{this};
    BusyGuard guard(this);
    return fn();
  }

  // Total time spent running tasks since construction.
  absl::Duration busy_time() const;
  const std::string& name() const { return name_; }

 private:
  // Adds the time from its construction to its destruction to busy_.
  class BusyGuard {
   public:
    explicit BusyGuard(SerialExecutor* executor) : executor_(executor), start_(absl::Now()) {}
    ~BusyGuard() { executor_->AddBusyTime(absl::Now() - start_); }
    BusyGuard(const BusyGuard&) = delete;
    BusyGuard& operator=(const BusyGuard&) = delete;

   private:
    SerialExecutor* executor_;
    absl::Time start_;
  };

  void Enqueue(std::function<void()> fn);
  // Waits until no task is queued or running, then holds the executor's thread off
  // until EndInline().
  void BeginInline();
  void EndInline();
  void AddBusyTime(absl::Duration took);
  void Run();

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // The thread runs a task.
  bool inline_ ABSL_GUARDED_BY(mu_) = false;   // A RunHere caller runs its task.
  absl::Duration busy_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERIAL_EXECUTOR_H_
