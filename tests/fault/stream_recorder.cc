#include "tests/fault/stream_recorder.h"

#include "absl/time/clock.h"

namespace tandem::fault {

v1::GenerateRequest GreedyRequest(const std::string& prompt, int tokens,
                                  v1::SpeculationMethod method, int k) {
  v1::GenerateRequest request;
  request.set_text(prompt);
  request.set_max_new_tokens(tokens);
  request.set_ignore_eos(true);
  request.set_return_token_ids(true);
  request.mutable_speculation()->set_method(method);
  if (k >= 0) request.mutable_speculation()->set_num_speculative_tokens(k);
  return request;
}

RecordedStream::RecordedStream(v1::Tandem::Stub* stub, v1::GenerateRequest request,
                               absl::Duration deadline) {
  if (deadline != absl::InfiniteDuration()) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
  started_ = absl::Now();
  thread_ = std::thread([this, stub, request = std::move(request)] { Run(stub, request); });
}

RecordedStream::~RecordedStream() {
  if (thread_.joinable()) {
    context_.TryCancel();
    thread_.join();
  }
}

void RecordedStream::Run(v1::Tandem::Stub* stub, v1::GenerateRequest request) {
  auto reader = stub->GenerateStream(&context_, request);
  v1::GenerateStreamResponse chunk;
  while (reader->Read(&chunk)) {
    absl::MutexLock lock(&mu_);
    if (chunk.token_ids_size() > 0) {
      tokens_.insert(tokens_.end(), chunk.token_ids().begin(), chunk.token_ids().end());
      last_token_ = absl::Now();
    }
    if (chunk.has_stats()) {
      finished_ = true;
      stats_ = chunk.stats();
    }
  }
  grpc::Status status = reader->Finish();
  absl::MutexLock lock(&mu_);
  status_ = status;
  ended_ = absl::Now();
}

void RecordedStream::Join() {
  if (thread_.joinable()) thread_.join();
}

int RecordedStream::tokens_received() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tokens_.size());
}

absl::Time RecordedStream::last_token_time() const {
  absl::MutexLock lock(&mu_);
  return last_token_;
}

bool WaitForTokens(const std::vector<std::unique_ptr<RecordedStream>>& streams, int tokens,
                   absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  for (;;) {
    bool all = true;
    for (const auto& s : streams) all &= s->tokens_received() >= tokens;
    if (all) return true;
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace tandem::fault
