// Helpers for the tokenizer tests: reading files, decoding, and streaming ids through
// an IncrementalDetokenizer in random chunks. For tests only (gtest expectations).
#ifndef TANDEM_MODEL_TOKENIZER_TEST_UTIL_H_
#define TANDEM_MODEL_TOKENIZER_TEST_UTIL_H_

#include <random>
#include <string>
#include <vector>

#include "model/test_data.h"  // ReadFile
#include "model/tokenizer.h"

namespace tandem {
namespace testing {

// Text that a code-trained vocabulary can only spell with byte fallback.
inline constexpr char kMultilingual[] =
    "Hello 世界! 🎉👍🏽 naïve café — ☃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢, "
    "Ελληνικά, "
    "русский, "
    "עברית, "
    "日本語のテキスト 😀\n";

// Streams `ids` through a detokenizer in chunks of 1..max_chunk ids (sizes drawn from
// `random`); expects each delta to be valid UTF-8 and returns the concatenation (with
// Flush). Counts the empty deltas in `*empty_deltas` when given.
std::string Stream(const Tokenizer& tokenizer, const std::vector<int>& ids, int max_chunk,
                   std::mt19937* random, int* empty_deltas = nullptr);

// tokenizer.Decode(ids), expected to succeed ("" otherwise).
std::string Decoded(const Tokenizer& tokenizer, const std::vector<int>& ids);

}  // namespace testing
}  // namespace tandem

#endif  // TANDEM_MODEL_TOKENIZER_TEST_UTIL_H_
