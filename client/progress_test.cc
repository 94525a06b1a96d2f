#include "client/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace tandem::client {
namespace {

TEST(RenderProgressBarTest, FillsInProportion) {
  EXPECT_EQ(RenderProgressBar("draft c=4", 0.5, "5/10", absl::Milliseconds(1234), 10),
            "draft c=4 [#####.....] 5/10 1.2s");
  EXPECT_EQ(RenderProgressBar("x", 0, "0/3", absl::ZeroDuration(), 4), "x [....] 0/3 0.0s");
  EXPECT_EQ(RenderProgressBar("x", 1, "3/3", absl::Seconds(2), 4), "x [####] 3/3 2.0s");
  EXPECT_EQ(RenderProgressBar("x", 7, "", absl::ZeroDuration(), 2), "x [##]  0.0s");
  EXPECT_EQ(RenderProgressBar("x", NAN, "", absl::ZeroDuration(), 2), "x [..]  0.0s");
}

TEST(ProgressBarTest, NotATerminalPrintsOnlyTheFinalLine) {
  FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressBar bar(f, "label");
  bar.Update(0.3, "3/10");
  bar.Update(1.0, "10/10");
  bar.Finish("done: 10 requests");
  std::rewind(f);
  char buf[256] = {0};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  EXPECT_EQ(std::string(buf, n), "done: 10 requests\n");
}

}  // namespace
}  // namespace tandem::client
