// libFuzzer target: arbitrary bytes as a public GenerateRequest, through the
// coordinator's validator. Besides "no crash, no undefined behaviour", every accepted
// request must satisfy the validator's documented guarantees, and the sampling
// settings it hands to the workers must pass the workers' own validation (the two
// sides must never disagree on what is valid).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/random/random.h"
#include "coordinator/request_validation.h"
#include "coordinator/utf8.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/stubs/logging.h"
#include "spec/sampling.h"
#include "tandem/v1/tandem.pb.h"
#include "worker/sequence_sampling.h"

namespace {

using tandem::coordinator::ServerLimits;
using tandem::coordinator::ValidatedRequest;

ServerLimits Limits() {
  ServerLimits limits;
  limits.context_length = 2048;
  limits.vocab_size = 2048;
  limits.max_new_tokens_limit = 4096;
  limits.max_speculative_tokens = 8;
  limits.available_methods = {tandem::v1::SPECULATION_METHOD_DRAFT,
                              tandem::v1::SPECULATION_METHOD_PROMPT_LOOKUP};
  return limits;
}

void CheckAccepted(const ValidatedRequest& r, const ServerLimits& limits) {
  FUZZ_CHECK(!r.request_id.empty() && r.request_id.size() <= 128);
  if (r.prompt_is_text) {
    FUZZ_CHECK(!r.prompt_text.empty() &&
               static_cast<int>(r.prompt_text.size()) <= limits.max_prompt_bytes);
    FUZZ_CHECK(tandem::coordinator::FindInvalidUtf8(r.prompt_text) == std::string::npos);
  } else {
    FUZZ_CHECK(!r.prompt_token_ids.empty());
    FUZZ_CHECK(static_cast<int>(r.prompt_token_ids.size()) < limits.context_length);
    for (int32_t id : r.prompt_token_ids) FUZZ_CHECK(id >= 0 && id < limits.vocab_size);
  }
  FUZZ_CHECK(r.max_new_tokens >= 1 && r.max_new_tokens <= limits.max_new_tokens_limit);
  FUZZ_CHECK(static_cast<int>(r.stop.size()) <= limits.max_stop_strings);
  for (const std::string& s : r.stop) FUZZ_CHECK(!s.empty() && s.size() <= 256);
  FUZZ_CHECK(std::isfinite(r.sampling.temperature) && r.sampling.temperature >= 0 &&
             r.sampling.temperature <= 100);
  FUZZ_CHECK(r.sampling.top_p > 0 && r.sampling.top_p <= 1);
  FUZZ_CHECK(r.sampling.top_k >= 0 && r.sampling.top_k <= limits.vocab_size);
  FUZZ_CHECK(r.speculation.rule != tandem::v1::ACCEPTANCE_RULE_DEFAULT);
  if (r.speculation.fixed_k.has_value()) {
    FUZZ_CHECK(*r.speculation.fixed_k >= 0 &&
               *r.speculation.fixed_k <= limits.max_speculative_tokens);
  }
  FUZZ_CHECK(r.speculation.method != tandem::v1::SPECULATION_METHOD_MEDUSA &&
             r.speculation.method != tandem::v1::SPECULATION_METHOD_LOOKAHEAD);
  // What the workers receive must be valid for them.
  const tandem::v1::SequenceSampling wire = tandem::coordinator::ToSequenceSampling(r);
  FUZZ_CHECK(tandem::spec::ValidateSamplingConfig(tandem::worker::ToSamplingConfig(wire),
                                                  limits.vocab_size)
                 .ok());
  FUZZ_CHECK(tandem::worker::ToAcceptanceParams(wire).ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parsing invalid UTF-8 logs an error per input; the fuzzer expects it.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  static const ServerLimits limits = Limits();
  tandem::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::InsecureBitGen random;
  absl::StatusOr<ValidatedRequest> valid =
      tandem::coordinator::ValidateRequest(request, limits, random);
  if (!valid.ok()) {
    FUZZ_CHECK(valid.status().code() == absl::StatusCode::kInvalidArgument ||
               valid.status().code() == absl::StatusCode::kFailedPrecondition);
    FUZZ_CHECK(!valid.status().message().empty());
    return 0;
  }
  CheckAccepted(*valid, limits);
  // Prompt fitting: any length the tokenizer could produce.
  const int prompt_tokens = static_cast<int>(size % 4096);
  absl::StatusOr<int> room =
      tandem::coordinator::CheckPromptLength(prompt_tokens, valid->max_new_tokens, limits);
  if (room.ok()) {
    FUZZ_CHECK(*room >= 1 && *room <= valid->max_new_tokens &&
               prompt_tokens + *room <= limits.context_length);
  }
  return 0;
}
