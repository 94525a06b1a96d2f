// The lookahead pool, window and step layout without a model: LRU per key, key lookup,
// refresh from the Jacobi trajectory, and a layout whose ancestor closure is the
// paper's mask.
#include "coordinator/proposers/lookahead_window.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "gmock/gmock.h"

namespace tandem::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using V = std::vector<int32_t>;

TEST(NgramPoolTest, KeysByFirstTokenKeepsTheMostRecentGPerKey) {
  NgramPool pool(/*length=*/3, /*max_per_key=*/2);
  pool.Add(V{1, 2, 3});
  pool.Add(V{1, 4, 5});
  pool.Add(V{7, 8, 9});
  pool.Add(V{1, 2});  // Wrong length: ignored.
  EXPECT_THAT(pool.Find(1), ElementsAre(V{4, 5}, V{2, 3}));
  EXPECT_THAT(pool.Find(7), ElementsAre(V{8, 9}));
  EXPECT_THAT(pool.Find(2), IsEmpty());
  EXPECT_EQ(pool.size(), 3);
  pool.Add(V{1, 2, 3});  // Refreshed: now the most recent, nothing evicted.
  EXPECT_THAT(pool.Find(1), ElementsAre(V{2, 3}, V{4, 5}));
  pool.Add(V{1, 6, 6});  // Evicts the least recent, {4, 5}.
  EXPECT_THAT(pool.Find(1), ElementsAre(V{6, 6}, V{2, 3}));
  EXPECT_EQ(pool.size(), 3);
  NgramPool none(3, 0);
  none.Add(V{1, 2, 3});
  EXPECT_THAT(none.Find(1), IsEmpty());
  EXPECT_EQ(none.size(), 0);
}

TEST(NgramPoolTest, RemembersTheLowestSource) {
  NgramPool pool(3, 4);
  pool.Add(V{1, 2, 3}, 5);
  pool.Add(V{1, 4, 5}, 2);
  pool.Add(V{1, 2, 3}, 7);  // Refreshed: the most recent, its source still column 5.
  pool.Add(V{1, 6, 7});     // From committed tokens.
  EXPECT_EQ(pool.Find(1), (std::vector<V>{{6, 7}, {2, 3}, {4, 5}}));
  EXPECT_EQ(pool.Sources(1), (std::vector<int>{NgramPool::kCommittedSource, 5, 2}));
  pool.Add(V{1, 4, 5});  // Committed now: it would exist without any window.
  EXPECT_EQ(pool.Sources(1), (std::vector<int>{NgramPool::kCommittedSource, -1, 5}));
  EXPECT_THAT(pool.Sources(9), IsEmpty());
}

TEST(NgramPoolTest, AddAllTakesEveryNgramInOrder) {
  NgramPool pool(3, 4);
  pool.AddAll(V{5, 6, 7, 5, 6, 8});
  EXPECT_THAT(pool.Find(5), ElementsAre(V{6, 8}, V{6, 7}));
  EXPECT_THAT(pool.Find(6), ElementsAre(V{7, 5}));
  EXPECT_THAT(pool.Find(7), ElementsAre(V{5, 6}));
  EXPECT_EQ(pool.size(), 4);
}

TEST(JacobiWindowTest, FirstLevelIsTheRecentContext) {
  EXPECT_THAT(JacobiWindow(3, 2, V{1, 2, 3, 4, 5}).levels(), ElementsAre(V{3, 4, 5}));
  EXPECT_THAT(JacobiWindow(4, 2, V{8, 9}).levels(), ElementsAre(V{8, 9, 8, 9}));
  EXPECT_THAT(JacobiWindow(2, 2, V{}).levels(), ElementsAre(V{0, 0}));
}

TEST(JacobiWindowTest, WarmsUpThenShiftsAndEmitsTheColumnsNgrams) {
  JacobiWindow window(/*window=*/2, /*levels=*/3, V{10, 11});
  std::vector<V> ngrams;
  EXPECT_FALSE(window.Advance(V{1}, &ngrams));  // Not W tokens: unchanged.
  ASSERT_TRUE(window.Advance(V{20, 21}, &ngrams));
  ASSERT_TRUE(window.Advance(V{30, 31}, &ngrams));
  EXPECT_THAT(ngrams, IsEmpty());  // Warming up.
  EXPECT_THAT(window.levels(), ElementsAre(V{10, 11}, V{20, 21}, V{30, 31}));
  ASSERT_TRUE(window.Advance(V{40, 41}, &ngrams));
  EXPECT_THAT(ngrams, ElementsAre(V{10, 20, 30, 40}, V{11, 21, 31, 41}));
  EXPECT_THAT(window.levels(), ElementsAre(V{20, 21}, V{30, 31}, V{40, 41}));
}

// Ancestors of node i (indices), the root excluded.
std::set<int> Ancestors(const LookaheadStep& step, int i) {
  std::set<int> out;
  for (int p = step.parents[i]; p >= 0; p = step.parents[p]) out.insert(p);
  return out;
}

TEST(JacobiWindowTest, ResizeKeepsTheFirstColumnsAndRepeatsThemToGrow) {
  JacobiWindow w(3, 2, V{1, 2, 3});
  std::vector<V> ngrams;
  ASSERT_TRUE(w.Advance(V{4, 5, 6}, &ngrams));
  w.Resize(2);
  EXPECT_EQ(w.window(), 2);
  EXPECT_EQ(w.levels(), (std::vector<V>{{1, 2}, {4, 5}}));
  EXPECT_FALSE(w.Advance(V{7, 8, 9}, &ngrams));  // An answer of the old width.
  ASSERT_TRUE(w.Advance(V{7, 8}, &ngrams));
  EXPECT_EQ(ngrams, (std::vector<V>{{1, 4, 7}, {2, 5, 8}}));
  w.Resize(5);
  EXPECT_EQ(w.levels(), (std::vector<V>{{4, 5, 4, 5, 4}, {7, 8, 7, 8, 7}}));
}

TEST(BuildLookaheadStepTest, WithoutTheWindowOnlyTheGuesses) {
  NgramPool pool(3, 2);
  pool.AddAll(V{5, 6, 7});
  const JacobiWindow window(2, 2, V{1, 2});
  const LookaheadStep step = BuildLookaheadStep(pool, window, 5, 2, 16, /*with_window=*/false);
  EXPECT_EQ(step.tokens, (V{6, 7}));
  EXPECT_EQ(step.parents, (V{-1, 0}));
  EXPECT_EQ(step.acceptable, 2);
}

TEST(BuildLookaheadStepTest, TrieThenWindowWithThePapersMask) {
  NgramPool pool(3, 4);
  pool.Add(V{9, 1, 2});
  pool.Add(V{9, 1, 3});
  pool.Add(V{9, 4, 5});
  JacobiWindow window(3, 2, V{50, 51, 52});
  std::vector<V> ngrams;
  ASSERT_TRUE(window.Advance(V{60, 61, 62}, &ngrams));
  const LookaheadStep step = BuildLookaheadStep(pool, window, 9, /*max_guesses=*/4, 100);
  // Trie: 4 -> 5, 1 -> {3, 2} (most recent first, shared prefix 1 once).
  ASSERT_EQ(step.acceptable, 5);
  EXPECT_THAT(V(step.tokens.begin(), step.tokens.begin() + 5), ElementsAre(4, 5, 1, 3, 2));
  EXPECT_THAT(V(step.parents.begin(), step.parents.begin() + 5), ElementsAre(-1, 0, -1, 2, 2));
  EXPECT_THAT(V(step.tokens.begin() + 5, step.tokens.end()), ElementsAre(50, 51, 52, 60, 61, 62));
  // The window: node (l, j) = 5 + 3l + j sees the root, level 0 columns <= j and the
  // earlier levels of its column (the reference's mask), at depth j + 1 + l.
  for (int l = 0; l < 2; ++l) {
    for (int j = 0; j < 3; ++j) {
      std::set<int> want;
      for (int c = 0; c < j + (l > 0 ? 1 : 0); ++c) want.insert(5 + c);
      for (int m = 1; m < l; ++m) want.insert(5 + 3 * m + j);
      EXPECT_EQ(Ancestors(step, 5 + 3 * l + j), want) << l << "," << j;
      EXPECT_EQ(static_cast<int>(Ancestors(step, 5 + 3 * l + j).size()), j + l) << l << "," << j;
    }
  }
}

TEST(BuildLookaheadStepTest, BudgetsGuessesThenTheWindow) {
  NgramPool pool(3, 4);
  pool.Add(V{9, 1, 2});
  pool.Add(V{9, 4, 5});
  const JacobiWindow window(2, 2, V{7, 8});
  // Room for the window, one guess and the first token of the other.
  LookaheadStep step = BuildLookaheadStep(pool, window, 9, 4, 5);
  EXPECT_EQ(step.acceptable, 3);
  EXPECT_THAT(step.tokens, ElementsAre(4, 5, 1, 7, 8));
  EXPECT_THAT(step.parents, ElementsAre(-1, 0, -1, -1, 3));
  // G = 0: the window alone; an unknown key: the same.
  EXPECT_EQ(BuildLookaheadStep(pool, window, 9, 0, 10).acceptable, 0);
  step = BuildLookaheadStep(pool, window, 3, 4, 10);
  EXPECT_EQ(step.acceptable, 0);
  EXPECT_THAT(step.parents, ElementsAre(-1, 0));
  // No room for the window: guesses only, within max_nodes.
  step = BuildLookaheadStep(pool, window, 9, 4, 1);
  EXPECT_EQ(step.acceptable, 1);
  EXPECT_THAT(step.tokens, ElementsAre(4));
  EXPECT_THAT(BuildLookaheadStep(pool, window, 9, 4, 0).tokens, IsEmpty());
  EXPECT_EQ(LookaheadMaxNodes({.window = 4, .ngram = 3, .max_guesses = 2}), 12);
}

}  // namespace
}  // namespace tandem::coordinator
