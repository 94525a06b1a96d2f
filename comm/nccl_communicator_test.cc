// The `nccl` backend with one rank on one GPU, and its rank-order sum kernel against the
// CPU reference. Without a GPU (or without CUDA in the build) the GPU tests skip and
// say why; what can be checked without a device still runs.
#include "comm/nccl_communicator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "comm/rank_order_sum.h"
#include "kernels/cuda/device.h"

#if TANDEM_COMM_TEST_CUDA
#include <cuda_runtime_api.h>

#include "comm/rank_order_sum_cuda.h"
#endif

namespace tandem {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);

// Empty when a device is usable, else why not.
std::string WhyNoDevice() {
  if (!NcclCompiledIn()) return "built without CUDA";
  std::string why;
  if (cuda::DeviceCount(&why) == 0) return why.empty() ? "no CUDA device" : why;
  return "";
}

TEST(NcclCommunicatorTest, WithoutADeviceCreationFailsCleanly) {
  std::string why = WhyNoDevice();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present; covered by the GPU tests";
  std::printf("nccl backend unavailable here: %s\n", why.c_str());
  InMemoryStore store;
  auto comm = CreateNcclCommunicator(0, 1, store, NcclOptions());
  ASSERT_FALSE(comm.ok());
  if (NcclCompiledIn()) {
    EXPECT_TRUE(absl::IsUnavailable(comm.status())) << comm.status();
  } else {
    EXPECT_TRUE(absl::IsUnimplemented(comm.status())) << comm.status();
  }
}

TEST(NcclCommunicatorTest, RejectsBadRanks) {
  if (!NcclCompiledIn()) GTEST_SKIP() << "built without CUDA";
  InMemoryStore store;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateNcclCommunicator(1, 1, store, NcclOptions()).status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(CreateNcclCommunicator(-1, 2, store, NcclOptions()).status()));
}

#if TANDEM_COMM_TEST_CUDA

std::vector<float> MixedMagnitude(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> m(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-16, 16);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(m(rng), ex(rng));
  return v;
}

// Device buffer holding a copy of `host`.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) : bytes(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  void Upload(const void* host) {
    ASSERT_EQ(cudaMemcpy(ptr, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void Download(void* host) const {
    ASSERT_EQ(cudaMemcpy(host, ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  void* ptr = nullptr;
  size_t bytes;
};

TEST(NcclCommunicatorTest, SumKernelMatchesCpuReferenceBitwise) {
  std::string why = WhyNoDevice();
  if (!why.empty()) {
    std::printf("skipping GPU test: %s\n", why.c_str());
    GTEST_SKIP() << why;
  }
  for (int ranks : {1, 2, 4, 8}) {
    const size_t count = 100003;
    std::vector<float> gathered = MixedMagnitude(count * ranks, 11 + ranks);
    std::vector<float> expected(count);
    SumInRankOrder(gathered.data(), ranks, count, expected.data());
    DeviceBuffer in(gathered.size() * sizeof(float)), out(count * sizeof(float));
    in.Upload(gathered.data());
    ASSERT_EQ(cuda::LaunchSumInRankOrder(static_cast<const float*>(in.ptr), ranks, count,
                                         static_cast<float*>(out.ptr), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(count);
    out.Download(got.data());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), count * sizeof(float)), 0)
        << ranks << " ranks";
  }
}

TEST(NcclCommunicatorTest, SingleRankCollectivesOnDeviceMemory) {
  std::string why = WhyNoDevice();
  if (!why.empty()) {
    std::printf("skipping GPU test: %s\n", why.c_str());
    GTEST_SKIP() << why;
  }
  PrefixStore store(std::make_shared<InMemoryStore>(), "nccl-single");
  auto comm = CreateNcclCommunicator(0, 1, store, NcclOptions());
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->backend(), "nccl");
  EXPECT_EQ((*comm)->size(), 1);
  // The id was published for the (absent) other ranks.
  EXPECT_TRUE(store.GetOne("nccl_unique_id", absl::ZeroDuration()).ok());

  const size_t count = 4096;
  std::vector<float> x = MixedMagnitude(count, 3);
  DeviceBuffer data(count * sizeof(float));
  data.Upload(x.data());
  ASSERT_TRUE((*comm)->AllReduceSum(static_cast<float*>(data.ptr), count, kTimeout).ok());
  std::vector<float> got(count);
  data.Download(got.data());
  EXPECT_EQ(std::memcmp(got.data(), x.data(), count * sizeof(float)), 0);

  DeviceBuffer gathered(count * sizeof(float));
  ASSERT_TRUE((*comm)->AllGather(data.ptr, gathered.ptr, count * sizeof(float), kTimeout).ok());
  gathered.Download(got.data());
  EXPECT_EQ(std::memcmp(got.data(), x.data(), count * sizeof(float)), 0);

  ASSERT_TRUE((*comm)->Broadcast(data.ptr, count * sizeof(float), 0, kTimeout).ok());
  data.Download(got.data());
  EXPECT_EQ(std::memcmp(got.data(), x.data(), count * sizeof(float)), 0);
  EXPECT_TRUE((*comm)->Barrier(kTimeout).ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*comm)->Broadcast(data.ptr, 4, 1, kTimeout)));
}

TEST(NcclCommunicatorTest, MissingPeerTimesOutAtInit) {
  std::string why = WhyNoDevice();
  if (!why.empty()) {
    std::printf("skipping GPU test: %s\n", why.c_str());
    GTEST_SKIP() << why;
  }
  PrefixStore store(std::make_shared<InMemoryStore>(), "nccl-lonely");
  NcclOptions options;
  options.connect_timeout = absl::Seconds(2);
  absl::Time start = absl::Now();
  // Rank 1 of 2 waits for rank 0's id, which never comes.
  auto comm = CreateNcclCommunicator(1, 2, store, options);
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
}

#endif  // TANDEM_COMM_TEST_CUDA

}  // namespace
}  // namespace tandem
