// Plain-text tables for terminal output.
#ifndef TANDEM_CLIENT_TABLE_H_
#define TANDEM_CLIENT_TABLE_H_

#include <string>
#include <vector>

namespace tandem::client {

// Columns separated by two spaces; each column as wide as its widest cell. Cells that
// look numeric (digits with . - + % x, spaces and brackets, or "-") are right-aligned, others
// left-aligned. The first row is the header, underlined with dashes.
class TextTable {
 public:
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// `value` with `digits` decimals; "-" for NaN or infinity.
std::string FormatNumber(double value, int digits);
// `fraction` as a percentage with one decimal ("37.5%"); "-" for NaN.
std::string FormatPercent(double fraction);

// A median over repeats with its range: "12.5x [11.0-14.2]" (suffix after the median),
// just "12.5x" when min and max print the same (one repeat) or are not finite, "-" when
// the median is not finite. Negative values print as such ("-0.05 [-0.10-0.02]").
std::string FormatSpread(double median, double min, double max, int digits,
                         const std::string& suffix = "");

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_TABLE_H_
