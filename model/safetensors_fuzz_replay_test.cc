// Runs the libFuzzer entry point of safetensors_fuzzer.cc over the committed seed
// corpus and thousands of deterministic mutations of it, so the normal (gcc) build
// exercises the parser on hostile input; under --config=asan it also checks memory
// safety. Seed files named valid_* must parse, invalid_* must be rejected.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tandem {
namespace {

constexpr char kCorpusDir[] = "model/testdata/safetensors_corpus";

struct Seed {
  std::string name;
  std::string bytes;
};

std::vector<Seed> LoadCorpus() {
  std::vector<Seed> seeds;
  DIR* dir = opendir(kCorpusDir);
  if (dir == nullptr) return seeds;
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    std::ifstream file(std::string(kCorpusDir) + "/" + name, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    seeds.push_back({name, bytes.str()});
  }
  closedir(dir);
  std::sort(seeds.begin(), seeds.end(),
            [](const Seed& a, const Seed& b) { return a.name < b.name; });
  return seeds;
}

void RunOne(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// One random edit in the style of libFuzzer's mutators.
void Mutate(std::mt19937_64& random, const std::vector<Seed>& seeds, std::string* bytes) {
  auto pick = [&](size_t bound) { return bound == 0 ? 0 : static_cast<size_t>(random() % bound); };
  static const char kInteresting[] = "\0\xff\x7f\x80\"[]{},:-.e0123456789 ";
  switch (random() % 9) {
    case 0:  // Flip one bit.
      if (!bytes->empty()) (*bytes)[pick(bytes->size())] ^= static_cast<char>(1 << pick(8));
      break;
    case 1:  // Overwrite a byte with an interesting one.
      if (!bytes->empty()) {
        (*bytes)[pick(bytes->size())] = kInteresting[pick(sizeof(kInteresting) - 1)];
      }
      break;
    case 2:  // Insert a byte.
      bytes->insert(bytes->begin() + pick(bytes->size() + 1),
                    kInteresting[pick(sizeof(kInteresting) - 1)]);
      break;
    case 3: {  // Erase a range.
      const size_t begin = pick(bytes->size() + 1);
      bytes->erase(begin, pick(bytes->size() - begin + 1));
      break;
    }
    case 4:  // Truncate.
      bytes->resize(pick(bytes->size() + 1));
      break;
    case 5:  // Nudge the 8-byte header length.
      if (bytes->size() >= 8) {
        const int delta = static_cast<int>(pick(17)) - 8;
        (*bytes)[0] = static_cast<char>(static_cast<uint8_t>((*bytes)[0]) + delta);
        if (pick(8) == 0) (*bytes)[pick(8)] = static_cast<char>(random());
      }
      break;
    case 6: {  // Replace a digit run with another number.
      std::vector<size_t> digits;
      for (size_t i = 8; i < bytes->size(); ++i) {
        if ((*bytes)[i] >= '0' && (*bytes)[i] <= '9') digits.push_back(i);
      }
      if (digits.empty()) break;
      size_t begin = digits[pick(digits.size())], end = begin;
      while (end < bytes->size() && (*bytes)[end] >= '0' && (*bytes)[end] <= '9') ++end;
      static const char* const kNumbers[] = {"0",
                                             "1",
                                             "-1",
                                             "7",
                                             "4294967296",
                                             "18446744073709551615",
                                             "18446744073709551616",
                                             "9223372036854775807",
                                             "1e308",
                                             "2.5",
                                             "99999999"};
      bytes->replace(begin, end - begin, kNumbers[pick(sizeof(kNumbers) / sizeof(char*))]);
      break;
    }
    case 7: {  // Splice in a chunk of another seed.
      const std::string& other = seeds[pick(seeds.size())].bytes;
      const size_t from = pick(other.size() + 1);
      const std::string chunk = other.substr(from, pick(64));
      bytes->insert(pick(bytes->size() + 1), chunk);
      break;
    }
    default: {  // Duplicate a chunk of itself.
      const size_t from = pick(bytes->size() + 1);
      const std::string chunk = bytes->substr(from, pick(32));
      bytes->insert(pick(bytes->size() + 1), chunk);
      break;
    }
  }
}

TEST(SafetensorsFuzzReplayTest, SeedCorpusParsesAsNamed) {
  const std::vector<Seed> seeds = LoadCorpus();
  ASSERT_GE(seeds.size(), 8u) << "seed corpus missing under " << kCorpusDir;
  int valid = 0, invalid = 0;
  for (const Seed& seed : seeds) {
    RunOne(seed.bytes);
    auto header = ParseSafetensorsHeader(seed.bytes, seed.bytes.size(), seed.name);
    if (seed.name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(header.ok()) << seed.name << ": " << header.status();
      ++valid;
    } else if (seed.name.rfind("invalid_", 0) == 0) {
      EXPECT_FALSE(header.ok()) << seed.name << " was accepted";
      EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
      ++invalid;
    } else {
      ADD_FAILURE() << "seed " << seed.name << " is neither valid_* nor invalid_*";
    }
  }
  EXPECT_GT(valid, 0);
  EXPECT_GT(invalid, 0);
}

TEST(SafetensorsFuzzReplayTest, DeterministicMutationsNeverCrash) {
  const std::vector<Seed> seeds = LoadCorpus();
  ASSERT_FALSE(seeds.empty());
  std::mt19937_64 random(20240611);
  constexpr int kMutants = 6000;
  int accepted = 0;
  for (int i = 0; i < kMutants; ++i) {
    std::string bytes = seeds[i % seeds.size()].bytes;
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) Mutate(random, seeds, &bytes);
    RunOne(bytes);
    if (ParseSafetensorsHeader(bytes, bytes.size(), "mutant").ok()) ++accepted;
  }
  // Mutations both keep some files valid and break others: the run explored both.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, kMutants);
}

}  // namespace
}  // namespace tandem
