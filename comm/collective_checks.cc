#include "comm/collective_checks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

namespace tandem::testing {

void RunOnAllRanks(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

std::vector<float> MakeRankInput(int rank, size_t count, uint32_t seed) {
  std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(rank) * 104729u + 1u);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> values(count);
  for (float& v : values) v = std::ldexp(mantissa(rng), exponent(rng));
  return values;
}

std::vector<float> NaiveRankOrderSum(int size, size_t count, uint32_t seed) {
  std::vector<float> acc = MakeRankInput(0, count, seed);
  for (int r = 1; r < size; ++r) {
    std::vector<float> x = MakeRankInput(r, count, seed);
    for (size_t e = 0; e < count; ++e) acc[e] = acc[e] + x[e];
  }
  return acc;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void ExpectAllReduceIsRankOrderSum(const std::vector<Communicator*>& ranks, size_t count,
                                   uint32_t seed, absl::Duration timeout) {
  const int size = static_cast<int>(ranks.size());
  const std::vector<float> expected = NaiveRankOrderSum(size, count, seed);
  // Independent sanity: close to the exact (double) sum.
  std::vector<double> exact(count, 0.0);
  for (int r = 0; r < size; ++r) {
    std::vector<float> x = MakeRankInput(r, count, seed);
    for (size_t e = 0; e < count; ++e) exact[e] += x[e];
  }
  for (size_t e = 0; e < count; ++e) {
    ASSERT_NEAR(expected[e], exact[e], 1e-6 * size * 4096.0) << "element " << e;
  }
  std::vector<std::vector<float>> results(ranks.size());
  RunOnAllRanks(size, [&](int r) {
    results[r] = MakeRankInput(r, count, seed);
    absl::Status status = ranks[r]->AllReduceSum(results[r].data(), count, timeout);
    EXPECT_TRUE(status.ok()) << "rank " << r << ": " << status;
  });
  for (int r = 0; r < size; ++r) {
    EXPECT_TRUE(BitwiseEqual(results[r], expected))
        << "rank " << r << " differs from the rank-order sum (count " << count << ")";
  }
}

void ExpectAllReduceBatchInvariant(const std::vector<Communicator*>& ranks, size_t batch,
                                   const std::vector<size_t>& probes, uint32_t seed,
                                   absl::Duration timeout) {
  const int size = static_cast<int>(ranks.size());
  std::vector<std::vector<float>> batched(ranks.size());
  RunOnAllRanks(size, [&](int r) {
    batched[r] = MakeRankInput(r, batch, seed);
    absl::Status status = ranks[r]->AllReduceSum(batched[r].data(), batch, timeout);
    EXPECT_TRUE(status.ok()) << "rank " << r << ": " << status;
  });
  for (size_t probe : probes) {
    ASSERT_LT(probe, batch);
    std::vector<float> alone(ranks.size());
    RunOnAllRanks(size, [&](int r) {
      alone[r] = MakeRankInput(r, batch, seed)[probe];
      absl::Status status = ranks[r]->AllReduceSum(&alone[r], 1, timeout);
      EXPECT_TRUE(status.ok()) << "rank " << r << ": " << status;
    });
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(std::memcmp(&alone[r], &batched[r][probe], sizeof(float)), 0)
          << "rank " << r << " element " << probe << ": alone " << alone[r] << " vs batched "
          << batched[r][probe];
    }
  }
}

void ExpectAllGatherCorrect(const std::vector<Communicator*>& ranks, size_t bytes,
                            absl::Duration timeout) {
  const int size = static_cast<int>(ranks.size());
  auto byte_of = [](int rank, size_t i) {
    return static_cast<unsigned char>((rank * 37 + i * 11 + (i >> 8)) & 0xff);
  };
  std::vector<std::vector<unsigned char>> outputs(ranks.size());
  RunOnAllRanks(size, [&](int r) {
    std::vector<unsigned char> in(bytes);
    for (size_t i = 0; i < bytes; ++i) in[i] = byte_of(r, i);
    outputs[r].assign(bytes * size, 0);
    absl::Status status = ranks[r]->AllGather(in.data(), outputs[r].data(), bytes, timeout);
    EXPECT_TRUE(status.ok()) << "rank " << r << ": " << status;
  });
  for (int r = 0; r < size; ++r) {
    for (int src = 0; src < size; ++src) {
      for (size_t i = 0; i < bytes; ++i) {
        if (outputs[r][src * bytes + i] != byte_of(src, i)) {
          ADD_FAILURE() << "rank " << r << " has a wrong byte " << i << " from rank " << src;
          return;
        }
      }
    }
  }
}

void ExpectBroadcastCorrect(const std::vector<Communicator*>& ranks, size_t bytes,
                            absl::Duration timeout) {
  const int size = static_cast<int>(ranks.size());
  for (int root = 0; root < size; ++root) {
    std::vector<std::vector<unsigned char>> buffers(ranks.size());
    RunOnAllRanks(size, [&](int r) {
      buffers[r].resize(bytes);
      for (size_t i = 0; i < bytes; ++i) {
        buffers[r][i] = static_cast<unsigned char>((r * 53 + i * 7) & 0xff);
      }
      absl::Status status = ranks[r]->Broadcast(buffers[r].data(), bytes, root, timeout);
      EXPECT_TRUE(status.ok()) << "rank " << r << " root " << root << ": " << status;
    });
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < bytes; ++i) {
        if (buffers[r][i] != static_cast<unsigned char>((root * 53 + i * 7) & 0xff)) {
          ADD_FAILURE() << "rank " << r << " byte " << i << " is not root " << root << "'s";
          break;
        }
      }
    }
  }
}

void ExpectBarrierSynchronizes(const std::vector<Communicator*>& ranks, int rounds,
                               absl::Duration timeout) {
  const int size = static_cast<int>(ranks.size());
  std::vector<std::atomic<int>> entered(static_cast<size_t>(rounds));
  for (auto& e : entered) e.store(0);
  RunOnAllRanks(size, [&](int r) {
    for (int round = 0; round < rounds; ++round) {
      // Stagger arrivals so a barrier that does not wait would be caught.
      if ((round + r) % size == 0) absl::SleepFor(absl::Milliseconds(20));
      entered[round].fetch_add(1);
      absl::Status status = ranks[r]->Barrier(timeout);
      EXPECT_TRUE(status.ok()) << "rank " << r << " round " << round << ": " << status;
      EXPECT_EQ(entered[round].load(), size)
          << "rank " << r << " left barrier " << round << " before all ranks entered";
    }
  });
}

std::vector<CallOutcome> AllReduceWithoutTheLastRank(
    const std::vector<std::unique_ptr<Communicator>>& ranks, absl::Duration timeout) {
  std::vector<CallOutcome> outcomes(ranks.size() - 1);
  RunOnAllRanks(static_cast<int>(outcomes.size()), [&](int r) {
    std::vector<float> x(16, 1.0f);
    absl::Time start = absl::Now();
    outcomes[r].status = ranks[r]->AllReduceSum(x.data(), x.size(), timeout);
    outcomes[r].took = absl::Now() - start;
  });
  return outcomes;
}

}  // namespace tandem::testing
