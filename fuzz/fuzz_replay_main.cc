// Replays a libFuzzer entry point (linked in) without libFuzzer, for the normal gcc
// build: every file of the seed corpus directories named on the command line, then
// deterministic mutations of them (bit flips, byte edits, truncations, splices) in the
// style of libFuzzer's mutators. A broken invariant aborts, which fails the test.
//   fuzz_replay DIR... [--mutations=N]
#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> LoadCorpus(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') names.push_back(entry->d_name);
    }
    closedir(dir);
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> seeds;
  for (const std::string& name : names) {
    std::ifstream file(path + "/" + name, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    seeds.push_back(bytes.str());
  }
  return seeds;
}

void RunOne(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

void Mutate(std::mt19937_64& random, const std::vector<std::string>& seeds, std::string* b) {
  auto pick = [&](size_t bound) { return bound == 0 ? size_t{0} : size_t(random() % bound); };
  static const uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12,
                                         0x1a, 0x22, 0xc3, 0xe2, 0xf0, 0x20, 0x2a, 0x3a};
  switch (random() % 7) {
    case 0:  // Flip a bit.
      if (!b->empty()) (*b)[pick(b->size())] ^= static_cast<char>(1 << pick(8));
      break;
    case 1:  // Overwrite a byte with an interesting value.
      if (!b->empty()) (*b)[pick(b->size())] = static_cast<char>(kInteresting[pick(16)]);
      break;
    case 2:  // Insert a byte.
      b->insert(b->begin() + pick(b->size() + 1), static_cast<char>(kInteresting[pick(16)]));
      break;
    case 3:  // Erase a range.
      if (!b->empty()) {
        const size_t at = pick(b->size());
        b->erase(at, 1 + pick(std::min<size_t>(8, b->size() - at)));
      }
      break;
    case 4:  // Truncate.
      b->resize(pick(b->size() + 1));
      break;
    case 5: {  // Splice in part of another seed.
      const std::string& other = seeds[pick(seeds.size())];
      if (!other.empty()) {
        const size_t from = pick(other.size());
        b->insert(pick(b->size() + 1), other.substr(from, 1 + pick(other.size() - from)));
      }
      break;
    }
    default:  // Duplicate a range.
      if (!b->empty()) {
        const size_t at = pick(b->size());
        b->insert(pick(b->size() + 1),
                  b->substr(at, 1 + pick(std::min<size_t>(16, b->size() - at))));
      }
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int mutations = 20000;
  std::vector<std::string> seeds;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mutations=", 12) == 0) {
      mutations = std::atoi(argv[i] + 12);
      continue;
    }
    std::vector<std::string> more = LoadCorpus(argv[i]);
    seeds.insert(seeds.end(), more.begin(), more.end());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "fuzz_replay: no seed files in the given directories\n");
    return 1;
  }
  for (const std::string& s : seeds) RunOne(s);
  std::mt19937_64 random(20240611);
  for (int i = 0; i < mutations; ++i) {
    std::string bytes = seeds[random() % seeds.size()];
    const int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits; ++e) Mutate(random, seeds, &bytes);
    RunOne(bytes);
  }
  std::printf("fuzz_replay: %zu seeds and %d mutations, no invariant broken\n", seeds.size(),
              mutations);
  return 0;
}
