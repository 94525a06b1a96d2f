#include "coordinator/serial_executor.h"

namespace tandem::coordinator {

SerialExecutor::SerialExecutor(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { Run(); });
}

SerialExecutor::~SerialExecutor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void SerialExecutor::Enqueue(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fn));
}

void SerialExecutor::AddBusyTime(absl::Duration took) {
  absl::MutexLock lock(&mu_);
  busy_ += took;
}

void SerialExecutor::BeginInline() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && !running_ && !inline_;
  };
  mu_.Await(absl::Condition(&idle));
  inline_ = true;
}

void SerialExecutor::EndInline() {
  absl::MutexLock lock(&mu_);
  inline_ = false;
}

absl::Duration SerialExecutor::busy_time() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

void SerialExecutor::Run() {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return (!queue_.empty() && !inline_) || (stopping_ && queue_.empty());
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    fn();
    absl::MutexLock lock(&mu_);
    running_ = false;
  }
}

}  // namespace tandem::coordinator
