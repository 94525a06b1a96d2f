// The hand-off of generated output from the engine thread to the RPC handler that
// serves the request. The engine pushes chunks; the handler pops them, streaming each
// (GenerateStream) or accumulating them (Generate). The last chunk has `final` set.
#ifndef TANDEM_COORDINATOR_OUTPUT_CHANNEL_H_
#define TANDEM_COORDINATOR_OUTPUT_CHANNEL_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tandem/v1/tandem.pb.h"

namespace tandem::coordinator {

struct OutputChunk {
  std::string text;                // Text delta (valid UTF-8, stop strings removed).
  std::vector<int32_t> token_ids;  // Tokens committed with this delta.
  std::vector<float> logprobs;     // Per token, when requested.
  bool final = false;              // Last chunk of the request.
  // On the final chunk: OK with a finish reason, or the error that ended the request.
  absl::Status status;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::RequestStats stats;
};

class OutputChannel {
 public:
  void Push(OutputChunk chunk) {
    absl::MutexLock lock(&mu_);
    chunks_.push_back(std::move(chunk));
  }

  // Returns the chunks available now, waiting up to `timeout` for the first one.
  std::vector<OutputChunk> Pop(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !chunks_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    std::vector<OutputChunk> out(std::make_move_iterator(chunks_.begin()),
                                 std::make_move_iterator(chunks_.end()));
    chunks_.clear();
    return out;
  }

 private:
  absl::Mutex mu_;
  std::deque<OutputChunk> chunks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::coordinator

#endif  // TANDEM_COORDINATOR_OUTPUT_CHANNEL_H_
