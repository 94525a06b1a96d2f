// Incremental stop-string matching for streamed generation.
//
// Text arrives in deltas (newly decoded text). The matcher returns the text that is
// safe to emit now and holds back any tail that could still turn into a stop string, so
// a stop string is never emitted, even when it spans several deltas. Output never ends
// inside a UTF-8 character: an incomplete trailing character is held back until its
// remaining bytes arrive.
//
// Semantics (identical to searching the whole text after each delta): generation stops
// at the first delta after which the accumulated text contains any stop string; the
// output is the text before the earliest-starting occurrence present at that moment.
// The stop string and everything after it are dropped.
#ifndef TANDEM_COORDINATOR_STOP_MATCHER_H_
#define TANDEM_COORDINATOR_STOP_MATCHER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tandem::coordinator {

class StopMatcher {
 public:
  struct Result {
    std::string emit;      // Text to send now (may be empty).
    bool stopped = false;  // A stop string matched; the sequence is finished.
  };

  // `stop_strings`: non-empty strings (empty ones are ignored). Validated requests
  // carry valid UTF-8 stop strings, which is what makes matching character-exact.
  explicit StopMatcher(std::vector<std::string> stop_strings);

  // Appends newly decoded text. After a stop, further calls return nothing.
  Result Feed(absl::string_view delta);

  // End of generation (no stop matched): returns the held-back text. A trailing
  // incomplete UTF-8 character, which can no longer be completed, is replaced by
  // U+FFFD. Returns "" after a stop or a previous Flush.
  std::string Flush();

  bool stopped() const { return stopped_; }
  // Bytes returned so far by Feed and Flush.
  size_t emitted_bytes() const { return emitted_bytes_; }
  // Bytes currently held back.
  size_t held_bytes() const { return held_.size(); }

 private:
  // Earliest position in held_ from which held_ is a proper prefix of a stop string,
  // or held_.size() when there is none.
  size_t EarliestPartialMatch() const;

  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  std::string held_;  // Text received but not yet emitted.
  size_t emitted_bytes_ = 0;
  bool stopped_ = false;
  bool flushed_ = false;
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_STOP_MATCHER_H_
