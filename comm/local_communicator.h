// `local` backend: ranks that live in one process and share memory.
//
// With one rank (tp = 1) every collective is a copy or a no-op. With several ranks
// (LocalGroup, for unit tests of tensor-parallel code) each Communicator must be used
// from its own thread; ranks meet at each call, exchange through shared buffers and
// reduce in rank order (the same bits as every other backend's AllReduceSum). A rank
// that does not arrive within the timeout makes the waiting ranks fail with
// DEADLINE_EXCEEDED; after any failure the group is broken and every later call on
// any of its ranks fails at once with that first error.
#ifndef TANDEM_COMM_LOCAL_COMMUNICATOR_H_
#define TANDEM_COMM_LOCAL_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace tandem {

class LocalGroup {
 public:
  // Communicators for ranks 0..size-1 of one in-process group (size >= 1); element r
  // is rank r. They share state that lives as long as the longest-lived of them.
  static absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> Create(int size);
};

// The tp = 1 communicator (a group of one).
std::unique_ptr<Communicator> CreateSingleRankCommunicator();

}  // namespace tandem

#endif  // TANDEM_COMM_LOCAL_COMMUNICATOR_H_
