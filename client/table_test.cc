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

}  // namespace
}  // namespace tandem::client
