#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tandem {
namespace cpu {
namespace {

// How long a thread polls before blocking: long enough to bridge the gap between
// consecutive ops of a forward pass, short enough not to burn an idle core.
constexpr std::chrono::microseconds kSpinTime(100);

// True while this thread runs a range of some pool's job (nested calls run inline).
thread_local bool t_inside_job = false;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Polls `ready` for up to kSpinTime; returns whether it became true.
template <typename Pred>
bool SpinUntil(const Pred& ready) {
  if (ready()) return true;
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() > deadline) return ready();
  }
}

}  // namespace

struct ThreadPool::Worker {
  // Job hand-off: the caller fills the fields, then sets `ticket` to the job's
  // generation. Whoever moves `claimed` to that generation first runs the range.
  std::atomic<uint64_t> ticket{0};
  std::atomic<uint64_t> claimed{0};
  RangeFn call = nullptr;
  const void* closure = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
  bool stop = false;  // Guarded by mu.
  std::atomic<bool> sleeping{false};
  std::mutex mu;
  std::condition_variable cv;

  // Claims this worker's range of job `generation`; false if someone else did.
  bool Claim(uint64_t generation) {
    uint64_t seen = claimed.load(std::memory_order_seq_cst);
    while (seen < generation) {
      if (claimed.compare_exchange_weak(seen, generation, std::memory_order_seq_cst)) return true;
    }
    return false;
  }
};

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& worker : workers_) {
    Worker* w = worker.get();
    threads_.emplace_back([this, w] { WorkerLoop(w); });
  }
}

ThreadPool::~ThreadPool() {
  for (auto& worker : workers_) {
    std::lock_guard<std::mutex> lock(worker->mu);
    worker->stop = true;
    worker->cv.notify_one();
  }
  for (auto& thread : threads_) thread.join();
}

int ThreadPool::NumRanges(int64_t n, int64_t min_chunk) const {
  if (n <= 0) return 0;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int64_t by_size = (n + min_chunk - 1) / min_chunk;
  return static_cast<int>(std::min<int64_t>(num_threads_, by_size));
}

void ThreadPool::Run(int64_t n, int64_t min_chunk, RangeFn call, const void* closure) {
  const int ranges = NumRanges(n, min_chunk);
  if (ranges == 0) return;
  if (ranges == 1 || t_inside_job) {
    call(closure, 0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mu_);
  const uint64_t generation = ++generation_;
  pending_.store(ranges - 1, std::memory_order_seq_cst);
  for (int t = 1; t < ranges; ++t) {
    Worker* w = workers_[t - 1].get();
    w->call = call;
    w->closure = closure;
    w->begin = n * t / ranges;
    w->end = n * (t + 1) / ranges;
    w->ticket.store(generation, std::memory_order_seq_cst);
    if (w->sleeping.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(w->mu);
      w->cv.notify_one();
    }
  }
  t_inside_job = true;
  call(closure, 0, n / ranges);
  // Run the ranges no worker has started yet.
  for (int t = ranges - 1; t >= 1; --t) {
    Worker* w = workers_[t - 1].get();
    if (w->Claim(generation)) {
      call(closure, n * t / ranges, n * (t + 1) / ranges);
      pending_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }
  t_inside_job = false;

  auto done = [this] { return pending_.load(std::memory_order_seq_cst) == 0; };
  if (!SpinUntil(done)) {
    std::unique_lock<std::mutex> lock(done_mu_);
    caller_sleeping_.store(true, std::memory_order_seq_cst);
    done_cv_.wait(lock, done);
    caller_sleeping_.store(false, std::memory_order_relaxed);
  }
}

void ThreadPool::WorkerLoop(Worker* w) {
  uint64_t seen = 0;
  auto has_job = [w, &seen] { return w->ticket.load(std::memory_order_seq_cst) != seen; };
  while (true) {
    if (!SpinUntil(has_job)) {
      std::unique_lock<std::mutex> lock(w->mu);
      w->sleeping.store(true, std::memory_order_seq_cst);
      w->cv.wait(lock, [&] { return w->stop || has_job(); });
      w->sleeping.store(false, std::memory_order_relaxed);
      if (w->stop && !has_job()) return;
    }
    seen = w->ticket.load(std::memory_order_seq_cst);
    if (!w->Claim(seen)) continue;  // The caller ran it.
    t_inside_job = true;
    w->call(w->closure, w->begin, w->end);
    t_inside_job = false;
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_sleeping_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lock(done_mu_);
      done_cv_.notify_one();
    }
  }
}

}  // namespace cpu
}  // namespace tandem
