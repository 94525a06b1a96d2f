#include "coordinator/stop_matcher.h"

#include <random>
#include <string>
#include <vector>

#include "coordinator/utf8.h"
#include "gtest/gtest.h"

namespace tandem::coordinator {
namespace {

// Feeds `deltas` and returns everything emitted (including Flush when not stopped).
std::string FeedAll(StopMatcher& m, const std::vector<std::string>& deltas, bool* stopped) {
  std::string out;
  *stopped = false;
  for (const std::string& d : deltas) {
    StopMatcher::Result r = m.Feed(d);
    out += r.emit;
    if (r.stopped) {
      *stopped = true;
      break;
    }
  }
  if (!*stopped) out += m.Flush();
  return out;
}

TEST(StopMatcherTest, NoStopStringsEmitsEverythingAtOnce) {
  StopMatcher m({});
  StopMatcher::Result r = m.Feed("hello ");
  EXPECT_EQ(r.emit, "hello ");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.Feed("world").emit, "world");
  EXPECT_EQ(m.Flush(), "");
  EXPECT_EQ(m.emitted_bytes(), 11u);
}

TEST(StopMatcherTest, StopInsideOneDelta) {
  StopMatcher m({"###"});
  StopMatcher::Result r = m.Feed("answer: 42### trailing");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "answer: 42");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Feed("more").emit, "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, StopSpanningDeltasIsHeldBackThenDropped) {
  StopMatcher m({"</end>"});
  StopMatcher::Result r = m.Feed("text </");
  EXPECT_EQ(r.emit, "text ");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.held_bytes(), 2u);
  r = m.Feed("en");
  EXPECT_EQ(r.emit, "");
  r = m.Feed("d> after");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
  EXPECT_EQ(m.emitted_bytes(), 5u);
}

TEST(StopMatcherTest, HeldTextReleasedWhenItStopsMatching) {
  StopMatcher m({"stop"});
  EXPECT_EQ(m.Feed("a st").emit, "a ");
  EXPECT_EQ(m.Feed("ar").emit, "star");
  EXPECT_EQ(m.Feed("s").emit, "");  // "s" may begin "stop".
  EXPECT_EQ(m.Flush(), "s");
}

TEST(StopMatcherTest, EarliestStartingStopWins) {
  StopMatcher m({"cd", "bcx"});
  StopMatcher::Result r = m.Feed("abcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "ab");
}

TEST(StopMatcherTest, MultiByteStopAndCharactersNeverSplit) {
  // "é" = C3 A9, "€" = E2 82 AC.
  StopMatcher m({"\xE2\x82\xAC\xE2\x82\xAC"});
  StopMatcher::Result r = m.Feed("caf\xC3");
  EXPECT_EQ(r.emit, "caf");  // Incomplete é held back.
  r = m.Feed("\xA9 \xE2\x82");
  EXPECT_EQ(r.emit, "\xC3\xA9 ");  // Partial € could begin the stop string.
  r = m.Feed(
      "\xAC"
      "5");
  EXPECT_EQ(r.emit,
            "\xE2\x82\xAC"
            "5");
  r = m.Feed("\xE2\x82\xAC\xE2");
  EXPECT_EQ(r.emit, "");
  r = m.Feed("\x82\xAC!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.emit, "");
}

TEST(StopMatcherTest, FlushReplacesIncompleteTrailingCharacter) {
  StopMatcher m({});
  EXPECT_EQ(m.Feed("ok\xF0\x9F").emit, "ok");
  EXPECT_EQ(m.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, EmptyStopStringsAreIgnored) {
  StopMatcher m({"", "zz"});
  EXPECT_EQ(m.Feed("abc").emit, "abc");
}

// Naive reference: recompute from the whole text after every delta.
struct NaiveState {
  std::string emitted;  // Expected total emission so far.
  bool stopped = false;
};

NaiveState NaiveAfter(const std::string& full, const std::vector<std::string>& stops) {
  NaiveState s;
  size_t match = std::string::npos;
  for (const std::string& stop : stops) match = std::min(match, full.find(stop));
  if (match != std::string::npos) {
    s.emitted = full.substr(0, match);
    s.stopped = true;
    return s;
  }
  size_t safe = full.size();
  for (size_t start = 0; start < full.size() && safe == full.size(); ++start) {
    for (const std::string& stop : stops) {
      const std::string tail = full.substr(start);
      if (tail.size() < stop.size() && stop.compare(0, tail.size(), tail) == 0) {
        safe = start;
        break;
      }
    }
  }
  // Back off to a character boundary: the longest valid prefix not ending mid-character.
  while (safe > 0 && !IsValidUtf8(full.substr(0, safe))) --safe;
  s.emitted = full.substr(0, safe);
  return s;
}

TEST(StopMatcherTest, RandomizedEquivalenceWithWholeTextSearch) {
  std::mt19937 rng(42);
  const std::vector<std::string> chars = {
      "a", "b", "c", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  auto random_text = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += chars[rng() % chars.size()];
    return s;
  };
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<std::string> stops;
    const int num_stops = rng() % 4;
    for (int i = 0; i < num_stops; ++i) stops.push_back(random_text(1 + rng() % 4));
    const std::string text = random_text(rng() % 30);
    // Random byte-level split: deltas may cut characters.
    std::vector<std::string> deltas;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::min<size_t>(text.size() - pos, rng() % 6);
      deltas.push_back(text.substr(pos, len));
      pos += len;
    }

    StopMatcher m(stops);
    std::string full, emitted;
    bool stopped = false;
    for (const std::string& d : deltas) {
      full += d;
      StopMatcher::Result r = m.Feed(d);
      emitted += r.emit;
      const NaiveState expected = NaiveAfter(full, stops);
      ASSERT_EQ(emitted, expected.emitted) << "iter " << iter;
      ASSERT_EQ(r.stopped, expected.stopped) << "iter " << iter;
      ASSERT_TRUE(IsValidUtf8(emitted)) << "iter " << iter;
      if (r.stopped) {
        stopped = true;
        break;
      }
    }
    if (!stopped) {
      emitted += m.Flush();
      ASSERT_EQ(emitted, full) << "iter " << iter;  // Whole text is valid UTF-8 here.
    }
    ASSERT_EQ(m.emitted_bytes(), emitted.size());
  }
}

TEST(StopMatcherTest, BlankLineStopAcrossDeltas) {
  StopMatcher m({"\n\n"});
  bool stopped = false;
  EXPECT_EQ(FeedAll(m, {"line1\n", "\nline2"}, &stopped), "line1");
  EXPECT_TRUE(stopped);
}

}  // namespace
}  // namespace tandem::coordinator
