#include "client/table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace tandem::client {
namespace {

bool LooksNumeric(const std::string& cell) {
  if (cell == "-") return true;
  if (cell.empty()) return false;
  bool digit = false;
  for (char c : cell) {
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c != '.' && c != '-' && c != '+' && c != '%' && c != 'x' && c != ' ' && c != '[' &&
               c != ']') {
      return false;
    }
  }
  return digit;
}

}  // namespace

void TextTable::AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

std::string TextTable::Render() const {
  size_t columns = 0;
  for (const auto& row : rows_) columns = std::max(columns, row.size());
  std::vector<size_t> width(columns, 0);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (size_t r = 0; r < rows_.size(); ++r) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      const std::string cell = c < rows_[r].size() ? rows_[r][c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) line += "  ";
      line += (r > 0 && LooksNumeric(cell)) ? pad + cell : cell + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (r == 0) {
      std::string rule;
      for (size_t c = 0; c < columns; ++c) rule += (c > 0 ? "  " : "") + std::string(width[c], '-');
      out += rule + "\n";
    }
  }
  return out;
}

std::string FormatNumber(double value, int digits) {
  if (!std::isfinite(value)) return "-";
  return absl::StrFormat("%.*f", digits, value);
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return absl::StrFormat("%.1f%%", 100.0 * fraction);
}

std::string FormatSpread(double median, double min, double max, int digits,
                         const std::string& suffix) {
  if (!std::isfinite(median)) return "-";
  std::string out = FormatNumber(median, digits) + suffix;
  const std::string lo = FormatNumber(min, digits), hi = FormatNumber(max, digits);
  if (std::isfinite(min) && std::isfinite(max) && lo != hi) {
    out += " [" + lo + "-" + hi + "]";
  }
  return out;
}

}  // namespace tandem::client
