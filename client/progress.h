// A one-line progress bar for long runs, drawn on a terminal (stderr).
#ifndef TANDEM_CLIENT_PROGRESS_H_
#define TANDEM_CLIENT_PROGRESS_H_

#include <cstdio>
#include <string>

#include "absl/time/time.h"

namespace tandem::client {

// "LABEL [#######.......]  7/15  12.3s" with `width` bar cells; fraction is clamped
// to [0, 1]. `counter` is shown as given (e.g. "7/15" or "42 req").
std::string RenderProgressBar(const std::string& label, double fraction, const std::string& counter,
                              absl::Duration elapsed, int width);

// Redraws the bar in place (carriage return) at most 10 times a second when `out` is
// a terminal; otherwise prints nothing until Finish.
class ProgressBar {
 public:
  ProgressBar(FILE* out, std::string label);
  void Update(double fraction, const std::string& counter);
  // Ends the bar: on a terminal, clears it; then prints `line` (if not empty).
  void Finish(const std::string& line);

 private:
  FILE* out_;
  std::string label_;
  bool tty_;
  absl::Time start_;
  absl::Time last_draw_ = absl::InfinitePast();
};

}  // namespace tandem::client

#endif  // TANDEM_CLIENT_PROGRESS_H_
