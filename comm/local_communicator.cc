#include "comm/local_communicator.h"

#include <cstring>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "comm/op_checks.h"
#include "comm/rank_order_sum.h"

namespace tandem {
namespace {

enum class OpKind { kAllReduceSum, kAllGather, kBroadcast, kBarrier };

const char* OpName(OpKind op) {
  switch (op) {
    case OpKind::kAllReduceSum:
      return "AllReduceSum";
    case OpKind::kAllGather:
      return "AllGather";
    case OpKind::kBroadcast:
      return "Broadcast";
    case OpKind::kBarrier:
      return "Barrier";
  }
  return "?";
}

// What one rank contributed to one call.
struct Contribution {
  OpKind op = OpKind::kBarrier;
  size_t bytes = 0;
  int root = 0;
  std::vector<char> data;
};

// State shared by the ranks of a group. Call number g of every rank uses
// contributions[g % 2][rank]: a rank can only be one call ahead of the slowest rank
// still reading (it cannot pass call g + 1 before everyone arrived there), so two
// slots per rank are enough and no second barrier is needed.
class SharedGroup {
 public:
  explicit SharedGroup(int size) : size_(size), arrived_(static_cast<size_t>(size), -1) {
    for (auto& slots : contributions_) slots.resize(static_cast<size_t>(size));
  }

  int size() const { return size_; }

  Contribution& Slot(int64_t call, int rank) {
    return contributions_[call % 2][static_cast<size_t>(rank)];
  }

  // Marks `rank` as arrived at `call` and waits for the others. Returns the group's
  // first error if it is (or becomes) broken, DEADLINE_EXCEEDED on timeout.
  absl::Status Arrive(int rank, int64_t call, OpKind op, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return Broken(rank);
    arrived_[static_cast<size_t>(rank)] = call;
    auto all_arrived = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (!broken_.ok()) return true;
      for (int64_t seen : arrived_) {
        if (seen < call) return false;
      }
      return true;
    };
    const absl::Time start = absl::Now();
    if (mu_.AwaitWithTimeout(absl::Condition(&all_arrived), timeout)) {
      return broken_.ok() ? absl::OkStatus() : Broken(rank);
    }
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (arrived_[static_cast<size_t>(r)] < call) missing.push_back(r);
    }
    broken_ = absl::DeadlineExceededError(
        absl::StrCat("local ", OpName(op), " #", call, ": rank ", rank, " waited ",
                     absl::FormatDuration(absl::Now() - start), " for rank(s) ",
                     absl::StrJoin(missing, ","), " that did not arrive"));
    return broken_;
  }

  // Records an error that every rank will see (e.g. mismatched calls).
  absl::Status Break(absl::Status status) {
    absl::MutexLock lock(&mu_);
    if (broken_.ok()) broken_ = std::move(status);
    return broken_;
  }

 private:
  absl::Status Broken(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::Status(
        broken_.code(),
        absl::StrCat("local group rank ", rank, ": group failed earlier: ", broken_.message()));
  }

  const int size_;
  std::vector<Contribution> contributions_[2];
  absl::Mutex mu_;
  std::vector<int64_t> arrived_ ABSL_GUARDED_BY(mu_);
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<SharedGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string backend() const override { return "local"; }

  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override {
    std::string op = Name("AllReduceSum");
    if (absl::Status s = CheckFloatCount(count, op); !s.ok()) return s;
    const size_t bytes = count * sizeof(float);
    if (absl::Status s = Check(data, bytes, timeout, op); !s.ok()) return s;
    if (size() == 1) return absl::OkStatus();
    Contribution& mine = Begin(OpKind::kAllReduceSum, bytes, 0);
    if (bytes > 0) std::memcpy(mine.data.data(), data, bytes);  // data may be null then.
    if (absl::Status s = Exchange(OpKind::kAllReduceSum, timeout); !s.ok()) return s;
    blocks_.resize(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r) {
      blocks_[r] = reinterpret_cast<const float*>(group_->Slot(call_, r).data.data());
    }
    SumInRankOrder(blocks_.data(), size(), count, data);
    return absl::OkStatus();
  }

  absl::Status AllGather(const void* in, void* out, size_t bytes, absl::Duration timeout) override {
    std::string op = Name("AllGather");
    if (absl::Status s = Check(in, bytes, timeout, op); !s.ok()) return s;
    if (absl::Status s = CheckBuffer(out, bytes * size(), op); !s.ok()) return s;
    if (size() == 1) {
      if (bytes > 0 && in != out) std::memmove(out, in, bytes);
      return absl::OkStatus();
    }
    Contribution& mine = Begin(OpKind::kAllGather, bytes, 0);
    if (bytes > 0) std::memcpy(mine.data.data(), in, bytes);
    if (absl::Status s = Exchange(OpKind::kAllGather, timeout); !s.ok()) return s;
    if (bytes == 0) return absl::OkStatus();
    for (int r = 0; r < size(); ++r) {
      std::memcpy(static_cast<char*>(out) + static_cast<size_t>(r) * bytes,
                  group_->Slot(call_, r).data.data(), bytes);
    }
    return absl::OkStatus();
  }

  absl::Status Broadcast(void* data, size_t bytes, int root, absl::Duration timeout) override {
    std::string op = Name("Broadcast");
    if (absl::Status s = Check(data, bytes, timeout, op); !s.ok()) return s;
    if (absl::Status s = CheckRoot(root, size(), op); !s.ok()) return s;
    if (size() == 1) return absl::OkStatus();
    Contribution& mine = Begin(OpKind::kBroadcast, bytes, root);
    if (rank_ == root && bytes > 0) std::memcpy(mine.data.data(), data, bytes);
    if (absl::Status s = Exchange(OpKind::kBroadcast, timeout); !s.ok()) return s;
    if (rank_ != root && bytes > 0) {
      std::memcpy(data, group_->Slot(call_, root).data.data(), bytes);
    }
    return absl::OkStatus();
  }

  absl::Status Barrier(absl::Duration timeout) override {
    std::string op = Name("Barrier");
    if (absl::Status s = CheckTimeout(timeout, op); !s.ok()) return s;
    if (size() == 1) return absl::OkStatus();
    Begin(OpKind::kBarrier, 0, 0);
    return Exchange(OpKind::kBarrier, timeout);
  }

 private:
  std::string Name(absl::string_view op) const {
    return absl::StrCat("local ", op, " (rank ", rank_, " of ", size(), ")");
  }

  static absl::Status Check(const void* data, size_t bytes, absl::Duration timeout,
                            absl::string_view op) {
    if (absl::Status s = CheckBuffer(data, bytes, op); !s.ok()) return s;
    return CheckTimeout(timeout, op);
  }

  // Starts the next call: fills in this rank's slot description and sizes its buffer.
  Contribution& Begin(OpKind op, size_t bytes, int root) {
    ++call_;
    Contribution& mine = group_->Slot(call_, rank_);
    mine.op = op;
    mine.bytes = bytes;
    mine.root = root;
    mine.data.resize(bytes);
    return mine;
  }

  // Waits for every rank, then checks that all made the same call.
  absl::Status Exchange(OpKind op, absl::Duration timeout) {
    if (absl::Status s = group_->Arrive(rank_, call_, op, timeout); !s.ok()) return s;
    const Contribution& mine = group_->Slot(call_, rank_);
    for (int r = 0; r < size(); ++r) {
      const Contribution& other = group_->Slot(call_, r);
      if (other.op != mine.op || other.bytes != mine.bytes || other.root != mine.root) {
        // Every rank compares against rank 0's view, so all report the same error.
        const Contribution& first = group_->Slot(call_, 0);
        return group_->Break(absl::InvalidArgumentError(absl::StrCat(
            "local call #", call_, ": ranks disagree, rank 0 called ", OpName(first.op), " (",
            first.bytes, " bytes, root ", first.root, ") and rank ", r, " called ",
            OpName(other.op), " (", other.bytes, " bytes, root ", other.root, ")")));
      }
    }
    return absl::OkStatus();
  }

  std::shared_ptr<SharedGroup> group_;
  const int rank_;
  int64_t call_ = -1;
  std::vector<const float*> blocks_;
};

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> LocalGroup::Create(int size) {
  if (size < 1 || size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("local group size must be in [1, 4096], got ", size));
  }
  auto group = std::make_shared<SharedGroup>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  ranks.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<LocalCommunicator>(group, r));
  return ranks;
}

std::unique_ptr<Communicator> CreateSingleRankCommunicator() {
  return std::make_unique<LocalCommunicator>(std::make_shared<SharedGroup>(1), 0);
}

}  // namespace tandem
