#include "coordinator/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "coordinator/utf8.h"

namespace tandem::coordinator {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (std::string& stop : stop_strings) {
    if (stop.empty()) continue;
    longest_stop_ = std::max(longest_stop_, stop.size());
    stops_.push_back(std::move(stop));
  }
}

size_t StopMatcher::EarliestPartialMatch() const {
  const absl::string_view held(held_);
  // A proper prefix of a stop string is shorter than the longest stop string.
  const size_t window = longest_stop_ > 0 ? longest_stop_ - 1 : 0;
  const size_t first = held.size() > window ? held.size() - window : 0;
  for (size_t start = first; start < held.size(); ++start) {
    const absl::string_view tail = held.substr(start);
    for (const std::string& stop : stops_) {
      // Proper prefix only: a full occurrence would already have stopped us.
      if (tail.size() < stop.size() && absl::string_view(stop).substr(0, tail.size()) == tail) {
        return start;
      }
    }
  }
  return held.size();
}

StopMatcher::Result StopMatcher::Feed(absl::string_view delta) {
  Result result;
  if (stopped_ || flushed_) return result;
  held_.append(delta.data(), delta.size());

  // No occurrence existed before this delta and none starts in emitted text (those
  // positions were held back while they could still begin one), so searching the
  // held text finds exactly the new occurrences.
  size_t match = std::string::npos;
  for (const std::string& stop : stops_) {
    match = std::min(match, held_.find(stop));
  }
  if (match != std::string::npos) {
    result.emit = held_.substr(0, match);
    result.stopped = true;
    stopped_ = true;
    held_.clear();
  } else {
    size_t safe = EarliestPartialMatch();
    safe -= IncompleteUtf8SuffixLength(absl::string_view(held_).substr(0, safe));
    result.emit = held_.substr(0, safe);
    held_.erase(0, safe);
  }
  emitted_bytes_ += result.emit.size();
  return result;
}

std::string StopMatcher::Flush() {
  if (stopped_ || flushed_) return "";
  flushed_ = true;
  std::string out = std::move(held_);
  held_.clear();
  const size_t incomplete = IncompleteUtf8SuffixLength(out);
  if (incomplete > 0) {
    out.resize(out.size() - incomplete);
    out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER.
  }
  emitted_bytes_ += out.size();
  return out;
}

}  // namespace tandem::coordinator
