// Plain-text tables for terminal output.
#ifndef TANDEM_CLIENT_TABLE_H_
#define TANDEM_CLIENT_TABLE_H_

#include <string>
#include <vector>

namespace tandem::client {

// Columns separated by two spaces; each column as wide as its widest cell. Cells that
// look numeric (or are "-") are right-aligned, others left-aligned. The first row is
// the header, underlined with dashes.
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

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_TABLE_H_
