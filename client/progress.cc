#include "client/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace tandem::client {

std::string RenderProgressBar(const std::string& label, double fraction, const std::string& counter,
                              absl::Duration elapsed, int width) {
  if (!(fraction >= 0)) fraction = 0;
  fraction = std::min(fraction, 1.0);
  const int filled = static_cast<int>(std::floor(fraction * width));
  return absl::StrFormat("%s [%s%s] %s %.1fs", label, std::string(filled, '#'),
                         std::string(width - filled, '.'), counter, absl::ToDoubleSeconds(elapsed));
}

ProgressBar::ProgressBar(FILE* out, std::string label)
    : out_(out), label_(std::move(label)), tty_(isatty(fileno(out)) == 1), start_(absl::Now()) {}

void ProgressBar::Update(double fraction, const std::string& counter) {
  if (!tty_) return;
  const absl::Time now = absl::Now();
  if (now - last_draw_ < absl::Milliseconds(100) && fraction < 1.0) return;
  last_draw_ = now;
  std::fprintf(out_, "\r%s\033[K",
               RenderProgressBar(label_, fraction, counter, now - start_, 30).c_str());
  std::fflush(out_);
}

void ProgressBar::Finish(const std::string& line) {
  if (tty_) std::fprintf(out_, "\r\033[K");
  if (!line.empty()) std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace tandem::client
