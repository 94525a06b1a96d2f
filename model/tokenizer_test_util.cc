#include "model/tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tandem {
namespace testing {

std::string Stream(const Tokenizer& tokenizer, const std::vector<int>& ids, int max_chunk,
                   std::mt19937* random, int* empty_deltas) {
  IncrementalDetokenizer detokenizer(&tokenizer);
  std::string text;
  size_t i = 0;
  while (i < ids.size()) {
    const size_t chunk = std::min<size_t>(ids.size() - i, 1 + (*random)() % max_chunk);
    auto delta = detokenizer.Add(absl::MakeConstSpan(ids.data() + i, chunk));
    EXPECT_TRUE(delta.ok()) << delta.status();
    if (!delta.ok()) return text;
    EXPECT_TRUE(IsValidUtf8(*delta)) << "invalid UTF-8 delta at id " << i;
    if (delta->empty() && empty_deltas != nullptr) ++*empty_deltas;
    text += *delta;
    i += chunk;
  }
  const std::string rest = detokenizer.Flush();
  EXPECT_TRUE(IsValidUtf8(rest));
  return text + rest;
}

std::string Decoded(const Tokenizer& tokenizer, const std::vector<int>& ids) {
  auto text = tokenizer.Decode(ids);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : std::string();
}

}  // namespace testing
}  // namespace tandem
