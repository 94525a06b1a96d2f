#include "comm/gloo_communicator.h"

#include <gloo/allgather.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "comm/gloo_store_adapter.h"
#include "comm/op_checks.h"
#include "comm/rank_order_sum.h"

namespace tandem {
namespace {

// gloo treats a zero timeout as "none"; never pass it one.
std::chrono::milliseconds ToGlooTimeout(absl::Duration timeout) {
  int64_t ms = absl::ToInt64Milliseconds(timeout);
  if (ms < 1) ms = 1;
  // gloo adds timeouts to steady_clock::now(); keep far from overflow.
  constexpr int64_t kMaxMs = int64_t{100} * 3600 * 1000;
  return std::chrono::milliseconds(std::min(ms, kMaxMs));
}

// Maps whatever gloo threw to a status; `what` names the call.
absl::Status StatusFromException(absl::string_view what, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const gloo::IoException& e) {
    std::string message = absl::StrCat(what, ": ", e.what());
    if (absl::StrContains(e.what(), "Timed out") || absl::StrContains(e.what(), "timeout")) {
      return absl::DeadlineExceededError(message);
    }
    return absl::UnavailableError(message);
  } catch (const gloo::EnforceNotMet& e) {
    return absl::UnavailableError(absl::StrCat(what, ": gloo check failed: ", e.what()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(what, ": ", e.what()));
  } catch (...) {
    return absl::UnavailableError(absl::StrCat(what, ": unknown error"));
  }
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::rendezvous::Context> context)
      : device_(std::move(device)), context_(std::move(context)) {}

  ~GlooCommunicator() override {
    try {
      context_.reset();
      device_.reset();
    } catch (...) {
      // Tearing down a half-failed mesh must not throw out of a destructor.
    }
  }

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string backend() const override { return "gloo"; }

  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override {
    const std::string op = Name("AllReduceSum");
    if (absl::Status s = CheckFloatCount(count, op); !s.ok()) return s;
    if (absl::Status s = Check(data, count * sizeof(float), timeout, op); !s.ok()) return s;
    if (count == 0 || size() == 1) return broken_;
    const size_t total = count * static_cast<size_t>(size());
    if (scratch_.size() < total) scratch_.resize(total);
    absl::Status status = Run(op, [&] {
      gloo::AllgatherOptions options(context_);
      options.setInput(data, count);
      options.setOutput(scratch_.data(), total);
      options.setTimeout(ToGlooTimeout(timeout));
      gloo::allgather(options);
    });
    if (!status.ok()) return status;
    SumInRankOrder(scratch_.data(), size(), count, data);
    return absl::OkStatus();
  }

  absl::Status AllGather(const void* in, void* out, size_t bytes, absl::Duration timeout) override {
    const std::string op = Name("AllGather");
    if (absl::Status s = Check(in, bytes, timeout, op); !s.ok()) return s;
    if (absl::Status s = CheckBuffer(out, bytes * size(), op); !s.ok()) return s;
    if (bytes == 0) return broken_;
    if (size() == 1) {
      if (in != out) std::memmove(out, in, bytes);
      return broken_;
    }
    return Run(op, [&] {
      gloo::AllgatherOptions options(context_);
      // gloo only reads the input; its API takes a mutable pointer.
      options.setInput(static_cast<char*>(const_cast<void*>(in)), bytes);
      options.setOutput(static_cast<char*>(out), bytes * static_cast<size_t>(size()));
      options.setTimeout(ToGlooTimeout(timeout));
      gloo::allgather(options);
    });
  }

  absl::Status Broadcast(void* data, size_t bytes, int root, absl::Duration timeout) override {
    const std::string op = Name("Broadcast");
    if (absl::Status s = Check(data, bytes, timeout, op); !s.ok()) return s;
    if (absl::Status s = CheckRoot(root, size(), op); !s.ok()) return s;
    if (bytes == 0 || size() == 1) return broken_;
    return Run(op, [&] {
      gloo::BroadcastOptions options(context_);
      options.setOutput(static_cast<char*>(data), bytes);
      options.setRoot(root);
      options.setTimeout(ToGlooTimeout(timeout));
      gloo::broadcast(options);
    });
  }

  absl::Status Barrier(absl::Duration timeout) override {
    const std::string op = Name("Barrier");
    if (absl::Status s = CheckTimeout(timeout, op); !s.ok()) return s;
    if (size() == 1) return broken_;
    return Run(op, [&] {
      gloo::BarrierOptions options(context_);
      options.setTimeout(ToGlooTimeout(timeout));
      gloo::barrier(options);
    });
  }

 private:
  std::string Name(absl::string_view op) const {
    return absl::StrCat("gloo ", op, " (rank ", rank(), " of ", size(), ")");
  }

  absl::Status Check(const void* data, size_t bytes, absl::Duration timeout,
                     absl::string_view op) const {
    if (absl::Status s = CheckBuffer(data, bytes, op); !s.ok()) return s;
    return CheckTimeout(timeout, op);
  }

  // Runs one gloo collective unless the communicator is already broken; breaks it on
  // any exception.
  template <typename Fn>
  absl::Status Run(absl::string_view op, Fn&& fn) {
    if (!broken_.ok()) return broken_;
    try {
      fn();
      return absl::OkStatus();
    } catch (...) {
      absl::Status status = StatusFromException(op, std::current_exception());
      broken_ = absl::Status(status.code(),
                             absl::StrCat("communicator failed earlier: ", status.message()));
      return status;
    }
  }

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  // Gathered inputs of AllReduceSum, grown on demand and reused.
  std::vector<float> scratch_;
  // OK until a call fails; then that failure, returned by every later call.
  absl::Status broken_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(int rank, int size,
                                                                     Store& store,
                                                                     const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: rank ", rank, " is not in a group of size ", size));
  }
  if (options.connect_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("gloo: connect_timeout must be positive");
  }
  const std::string where = absl::StrCat("gloo rank ", rank, " of ", size);
  gloo::transport::tcp::attr attr;
  if (!options.interface.empty()) {
    attr.iface = options.interface;
  } else if (!options.hostname.empty()) {
    attr.hostname = options.hostname;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": set a hostname or an interface to bind"));
  }
  const std::string endpoint = options.interface.empty()
                                   ? absl::StrCat("host '", options.hostname, "'")
                                   : absl::StrCat("interface '", options.interface, "'");
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (...) {
    absl::Status status = StatusFromException(
        absl::StrCat(where, ": cannot open a TCP device on ", endpoint), std::current_exception());
    return absl::Status(absl::StatusCode::kInvalidArgument, status.message());
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(ToGlooTimeout(options.connect_timeout));
  GlooStoreAdapter adapter(store, options.connect_timeout);
  try {
    context->connectFullMesh(adapter, device);
  } catch (...) {
    if (absl::Status store_error = adapter.first_error(); !store_error.ok()) {
      return absl::Status(store_error.code(),
                          absl::StrCat(where, ": rendezvous failed: ", store_error.message()));
    }
    absl::Status status = StatusFromException(
        absl::StrCat(where, ": connecting the full mesh via ", endpoint), std::current_exception());
    return absl::Status(status.code(),
                        absl::StrCat(status.message(),
                                     " (a peer is down, unreachable, or the run id was reused "
                                     "and a stale address was read)"));
  }
  return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(device), std::move(context)));
}

}  // namespace tandem
