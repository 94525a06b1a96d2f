// Test helpers that check a group of Communicators, one thread per rank. Shared by the
// tests of every backend so they all meet the same contract. Inputs are pure functions
// of (rank, seed), so a process that holds only one rank can compute every rank's
// input and the expected result too.
#ifndef TANDEM_COMM_COLLECTIVE_CHECKS_H_
#define TANDEM_COMM_COLLECTIVE_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"

namespace tandem::testing {

// Runs fn(rank) for rank 0..size-1, each on its own thread, and joins them.
void RunOnAllRanks(int size, const std::function<void(int rank)>& fn);

// Floats of widely mixed magnitude and sign, so a different summation order changes
// the rounded result for many elements.
std::vector<float> MakeRankInput(int rank, size_t count, uint32_t seed);

// The contract's reduction written out naively: acc = x0[e]; acc += x1[e]; ...
std::vector<float> NaiveRankOrderSum(int size, size_t count, uint32_t seed);

// True when a and b have the same bits everywhere.
bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b);

// AllReduceSum of MakeRankInput on every rank equals NaiveRankOrderSum bitwise, and is
// within float rounding of a double-precision sum.
void ExpectAllReduceIsRankOrderSum(const std::vector<Communicator*>& ranks, size_t count,
                                   uint32_t seed, absl::Duration timeout);

// Element `probe` reduced alone (count = 1) has the same bits as inside a batch of
// `batch` elements.
void ExpectAllReduceBatchInvariant(const std::vector<Communicator*>& ranks, size_t batch,
                                   const std::vector<size_t>& probes, uint32_t seed,
                                   absl::Duration timeout);

// Every rank receives every rank's distinct `bytes`-byte input in rank order.
void ExpectAllGatherCorrect(const std::vector<Communicator*>& ranks, size_t bytes,
                            absl::Duration timeout);

// From every root in turn, every rank ends with the root's bytes.
void ExpectBroadcastCorrect(const std::vector<Communicator*>& ranks, size_t bytes,
                            absl::Duration timeout);

// No rank leaves a barrier before every rank has entered it (checked over `rounds`).
void ExpectBarrierSynchronizes(const std::vector<Communicator*>& ranks, int rounds,
                               absl::Duration timeout);

// What one rank's call returned and how long it took.
struct CallOutcome {
  absl::Status status;
  absl::Duration took;
};

// Every rank but the last calls AllReduceSum (16 floats) with `timeout`, all at once;
// the last rank never calls. Element r is rank r's outcome.
std::vector<CallOutcome> AllReduceWithoutTheLastRank(
    const std::vector<std::unique_ptr<Communicator>>& ranks, absl::Duration timeout);

}  // namespace tandem::testing

#endif  // TANDEM_COMM_COLLECTIVE_CHECKS_H_
