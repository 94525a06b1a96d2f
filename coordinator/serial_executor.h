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
    auto task = std::make_shared<std::packaged_task<Result()>>(std::move(fn));
    std::future<Result> future = task->get_future();
    Enqueue([task] { (*task)(); });
    return future;
  }

  // Total time spent running tasks since construction.
  absl::Duration busy_time() const;
  const std::string& name() const { return name_; }

 private:
  void Enqueue(std::function<void()> fn);
  void Run();

  const std::string name_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration busy_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_SERIAL_EXECUTOR_H_
