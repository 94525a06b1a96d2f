#include "client/load_runner.h"

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace tandem::client {

RequestResult StreamOne(v1::Tandem::Stub* stub, const v1::GenerateRequest& request,
                        absl::Duration timeout) {
  RequestResult result;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const absl::Time start = absl::Now();
  std::unique_ptr<grpc::ClientReader<v1::GenerateStreamResponse>> reader =
      stub->GenerateStream(&ctx, request);
  v1::GenerateStreamResponse message;
  absl::Time first = absl::InfinitePast(), last = absl::InfinitePast();
  while (reader->Read(&message)) {
    const absl::Time now = absl::Now();
    if (!message.text_delta().empty() || message.token_ids_size() > 0) {
      if (first == absl::InfinitePast()) first = now;
      last = now;
    }
    result.text += message.text_delta();
    if (message.has_stats()) {
      result.has_stats = true;
      result.stats = message.stats();
      result.finish = message.finish_reason();
    }
  }
  const grpc::Status status = reader->Finish();
  const absl::Time end = absl::Now();
  result.code = static_cast<absl::StatusCode>(status.error_code());
  result.error = status.error_message();
  result.latency_ms = absl::ToDoubleMilliseconds(end - start);
  result.ttft_ms = first == absl::InfinitePast() ? NAN : absl::ToDoubleMilliseconds(first - start);
  const uint32_t tokens = result.has_stats ? result.stats.generated_tokens() : 0;
  result.tpot_ms = tokens >= 2 && first != absl::InfinitePast()
                       ? absl::ToDoubleMilliseconds(last - first) / (tokens - 1)
                       : NAN;
  return result;
}

void RunLoad(v1::Tandem::Stub* stub, const LoadSpec& spec,
             const std::function<v1::GenerateRequest(int number)>& make_request,
             const std::function<void(int number, const RequestResult& result)>& on_result,
             const std::atomic<bool>* stop) {
  std::atomic<int> next{0};
  absl::Mutex result_mu;
  const bool timed = spec.duration > absl::ZeroDuration();
  const absl::Time end = absl::Now() + spec.duration;
  auto worker = [&] {
    while (true) {
      if (stop != nullptr && stop->load()) return;
      if (timed && absl::Now() >= end) return;
      const int number = next.fetch_add(1);
      if (!timed && number >= spec.requests) return;
      v1::GenerateRequest request;
      {
        absl::MutexLock lock(&result_mu);  // make_request need not be thread-safe.
        request = make_request(number);
      }
      RequestResult result = StreamOne(stub, request, spec.request_timeout);
      absl::MutexLock lock(&result_mu);
      on_result(number, result);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < std::max(1, spec.concurrency); ++i) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
}

}  // namespace tandem::client
