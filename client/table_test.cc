#include "client/table.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem::client {
namespace {

TEST(TextTableTest, AlignsNumbersRightAndTextLeft) {
  TextTable t;
  t.AddRow({"method", "tok/s", "speedup"});
  t.AddRow({"none", "12.5", "1.00x"});
  t.AddRow({"prompt_lookup", "123.25", "-"});
  EXPECT_EQ(t.Render(),
            "method         tok/s   speedup\n"
            "-------------  ------  -------\n"
            "none             12.5    1.00x\n"
            "prompt_lookup  123.25        -\n");
}

TEST(TextTableTest, RaggedRowsAreFilled) {
  TextTable t;
  t.AddRow({"a", "b"});
  t.AddRow({"x"});
  EXPECT_EQ(t.Render(), "a  b\n-  -\nx\n");
}

TEST(FormatTest, NumbersAndPercentages) {
  EXPECT_EQ(FormatNumber(3.14159, 2), "3.14");
  EXPECT_EQ(FormatNumber(NAN, 2), "-");
  EXPECT_EQ(FormatNumber(INFINITY, 1), "-");
  EXPECT_EQ(FormatPercent(0.375), "37.5%");
  EXPECT_EQ(FormatPercent(NAN), "-");
}

TEST(FormatTest, SpreadShowsTheRangeOnlyWhenTheRepeatsDiffer) {
  EXPECT_EQ(FormatSpread(1.5, 1.0, 2.25, 2, "x"), "1.50x [1.00-2.25]");
  EXPECT_EQ(FormatSpread(42.04, 42.01, 42.0, 1), "42.0");
  EXPECT_EQ(FormatSpread(3, NAN, NAN, 0, "%"), "3%");
  EXPECT_EQ(FormatSpread(NAN, 1, 2, 1), "-");
}

TEST(TextTableTest, SpreadCellsAlignRight) {
  TextTable t;
  t.AddRow({"speedup"});
  t.AddRow({"1.50x [1.00-2.25]"});
  t.AddRow({"1.00x"});
  EXPECT_EQ(t.Render(),
            "speedup\n"
            "-----------------\n"
            "1.50x [1.00-2.25]\n"
            "            1.00x\n");
}

}  // namespace
}  // namespace tandem::client
