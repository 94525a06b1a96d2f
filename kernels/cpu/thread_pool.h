// A small persistent thread pool for data-parallel loops over an index range.
//
// ParallelFor(n, fn) splits [0, n) into T contiguous ranges, T = min(num_threads,
// ceil(n / min_chunk)); range t is [n*t/T, n*(t+1)/T). The calling thread runs range 0
// and worker t-1 range t; a range whose worker has not picked it up by the time the
// caller is free is run by the caller instead (a worker that is not scheduled on a
// busy machine delays nothing). The call returns when all are done. Workers spin
// briefly after a job (low wake-up latency for back-to-back ops), then block on a
// condition variable, so an idle pool uses no CPU. A pool of one thread, a single
// range, or a call made from inside a running range (nesting) runs inline. Calls from
// several threads are serialized. `fn` must not throw.
#ifndef TANDEM_KERNELS_CPU_THREAD_POOL_H_
#define TANDEM_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {
namespace cpu {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread; values below 1 mean 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Number of ranges ParallelFor(n, fn, min_chunk) uses.
  int NumRanges(int64_t n, int64_t min_chunk = 1) const;

  // Calls fn(begin, end) over contiguous ranges covering [0, n) (see above).
  template <typename Fn>
  void ParallelFor(int64_t n, const Fn& fn, int64_t min_chunk = 1) {
    Run(
        n, min_chunk,
        [](const void* f, int64_t b, int64_t e) { (*static_cast<const Fn*>(f))(b, e); }, &fn);
  }

 private:
  using RangeFn = void (*)(const void* closure, int64_t begin, int64_t end);
  struct Worker;

  void Run(int64_t n, int64_t min_chunk, RangeFn call, const void* closure);
  void WorkerLoop(Worker* worker);

  const int num_threads_;
  std::mutex submit_mu_;  // One job at a time.
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;

  uint64_t generation_ = 0;  // Jobs handed out so far (guarded by submit_mu_).
  // Completion of the current job: ranges 1.. not yet finished.
  std::atomic<int> pending_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
};

}  // namespace cpu
}  // namespace tandem

#endif  // TANDEM_KERNELS_CPU_THREAD_POOL_H_
