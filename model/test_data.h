// Small helpers shared by the model tests: scratch paths, whole files, random rows.
// For tests only.
#ifndef TANDEM_MODEL_TEST_DATA_H_
#define TANDEM_MODEL_TEST_DATA_H_

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tandem {
namespace testing {

// `name` under the test's scratch directory (TEST_TMPDIR, else /tmp).
inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// The whole file at `path` ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// `n` values drawn from N(0, scale^2), deterministic in `seed`.
inline std::vector<float> NormalRow(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> row(n);
  for (float& v : row) v = dist(rng);
  return row;
}

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_MODEL_TEST_DATA_H_
