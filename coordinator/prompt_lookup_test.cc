#include "coordinator/prompt_lookup.h"

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Independent O(n^2) reference: scan every earlier start, latest first.
std::vector<int32_t> NaivePropose(const std::vector<int32_t>& ctx, int k, int min_n, int max_n) {
  if (k <= 0) return {};
  const int size = static_cast<int>(ctx.size());
  for (int n = max_n; n >= min_n; --n) {
    if (size < n + 1) continue;
    for (int start = size - n - 1; start >= 0; --start) {
      bool same = true;
      for (int i = 0; i < n; ++i) same = same && ctx[start + i] == ctx[size - n + i];
      if (!same) continue;
      std::vector<int32_t> out;
      for (int i = start + n; i < size && static_cast<int>(out.size()) < k; ++i) {
        out.push_back(ctx[i]);
      }
      return out;
    }
  }
  return {};
}

PromptLookup Make(std::vector<int32_t> tokens, int min_n = 1, int max_n = 3, int branches = 1) {
  absl::StatusOr<PromptLookup> lookup = PromptLookup::Create({min_n, max_n, branches});
  EXPECT_TRUE(lookup.ok()) << lookup.status();
  lookup->Append(tokens);
  return *std::move(lookup);
}

TEST(PromptLookupTest, RejectsBadNgramBounds) {
  EXPECT_FALSE(PromptLookup::Create({0, 3}).ok());
  EXPECT_FALSE(PromptLookup::Create({3, 2}).ok());
  EXPECT_FALSE(PromptLookup::Create({1, PromptLookupOptions::kMaxNgram + 1}).ok());
  absl::Status status = PromptLookup::Create({0, 3}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("min_ngram"));
  EXPECT_FALSE(PromptLookup::Create({1, 3, 0}).ok());
  EXPECT_FALSE(PromptLookup::Create({1, 3, PromptLookupOptions::kMaxBranches + 1}).ok());
  EXPECT_TRUE(PromptLookup::Create({1, 3, PromptLookupOptions::kMaxBranches}).ok());
}

TEST(PromptLookupTest, EmptyAndTinyContexts) {
  PromptLookup lookup;
  EXPECT_THAT(lookup.Propose(4), IsEmpty());
  lookup.Append({7});
  EXPECT_THAT(lookup.Propose(4), IsEmpty());  // A single token has no earlier match.
  lookup.Append({7});
  EXPECT_THAT(lookup.Propose(4), ElementsAre(7));
  EXPECT_THAT(lookup.Propose(0), IsEmpty());
  EXPECT_THAT(lookup.Propose(-1), IsEmpty());
}

TEST(PromptLookupTest, NoMatch) { EXPECT_THAT(Make({1, 2, 3, 4, 5}).Propose(3), IsEmpty()); }

TEST(PromptLookupTest, LongestNgramPreferredOverMoreRecentShorterOne) {
  // Suffix [1 2 3]: trigram occurs at 0 (followed by 10 11); the bigram [2 3] and the
  // unigram [3] also occur later at 5..6 (followed by 20) but the trigram wins.
  PromptLookup lookup = Make({1, 2, 3, 10, 11, 2, 3, 20, 1, 2, 3});
  EXPECT_THAT(lookup.Propose(2), ElementsAre(10, 11));
}

TEST(PromptLookupTest, MostRecentOccurrenceWins) {
  PromptLookup lookup = Make({5, 9, 1, 5, 8, 2, 5}, 1, 1);
  EXPECT_THAT(lookup.Propose(2), ElementsAre(8, 2));
}

TEST(PromptLookupTest, FallsBackToShorterNgram) {
  PromptLookup lookup = Make({4, 6, 7, 9, 6}, 1, 3);
  EXPECT_THAT(lookup.Propose(5), ElementsAre(7, 9, 6));  // Runs into the end.
}

TEST(PromptLookupTest, OverlappingMatchOnRepetition) {
  // [a a a a]: the suffix [a a a] last occurred at 0, overlapping it; one token follows.
  PromptLookup lookup = Make({3, 3, 3, 3});
  EXPECT_THAT(lookup.Propose(4), ElementsAre(3));
  // Period-2 pattern: the latest earlier [1 2 1] starts at 2, overlapping the suffix at
  // 4..6, and its continuation runs into the end of the context after two tokens.
  PromptLookup periodic = Make({1, 2, 1, 2, 1, 2, 1});
  EXPECT_THAT(periodic.Propose(8), ElementsAre(2, 1));
}

TEST(PromptLookupTest, IncrementalAppendMatchesBulkAppend) {
  std::vector<int32_t> tokens = {1, 2, 3, 1, 2, 4, 1, 2, 3, 1};
  PromptLookup incremental;
  for (int32_t t : tokens) {
    incremental.Append({t});
  }
  PromptLookup bulk = Make(tokens);
  EXPECT_EQ(incremental.Propose(4), bulk.Propose(4));
  // Suffix [2 3 1] (7..9) occurred at 1..3, followed by 2 4 1 2.
  EXPECT_THAT(bulk.Propose(4), ElementsAre(2, 4, 1, 2));
  incremental.Append({2});
  // Suffix [3 1 2] (8..10) occurred at 2..4, followed by 4 1 2.
  EXPECT_THAT(incremental.Propose(3), ElementsAre(4, 1, 2));
}

TEST(PromptLookupTest, RandomSequencesMatchNaiveSearch) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    const int min_n = 1 + rng() % 3;
    const int max_n = min_n + rng() % 4;
    const int vocab = 2 + rng() % 6;  // Small vocabularies give many matches.
    PromptLookup lookup = Make({}, min_n, max_n);
    std::vector<int32_t> ctx;
    const int length = rng() % 200;
    while (static_cast<int>(ctx.size()) < length) {
      std::vector<int32_t> chunk(1 + rng() % 5);
      for (int32_t& t : chunk) t = static_cast<int32_t>(rng() % vocab) - 1;  // -1 allowed.
      lookup.Append(chunk);
      ctx.insert(ctx.end(), chunk.begin(), chunk.end());
      for (int k : {1, 3, 8}) {
        ASSERT_EQ(lookup.Propose(k), NaivePropose(ctx, k, min_n, max_n))
            << "iter " << iter << " size " << ctx.size() << " k " << k;
      }
    }
    EXPECT_EQ(lookup.context(), ctx);
  }
}

}  // namespace
}  // namespace tandem::coordinator
