#include "client/shared_flags.h"

#include "absl/flags/flag.h"

// Help text lives in each subcommand's CommandFlag list; these strings are for absl.
ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Tandem server address, host:port.");
ABSL_FLAG(int, max_tokens, 128, "Tokens to generate per request.");
ABSL_FLAG(std::optional<double>, temperature, std::nullopt,
          "Sampling temperature; 0 = greedy; unset: generate: the model's default, bench: 0.");
ABSL_FLAG(std::optional<int>, k, std::nullopt, "Draft length K; unset = adaptive.");
ABSL_FLAG(std::string, pipelining, "default", "Draft/verify overlap: default, on or off.");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past end-of-sequence.");
ABSL_FLAG(double, timeout, 600, "Per-request deadline, seconds.");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt,
          "Sampling seed (bench: requests for prompt i use seed + i).");
ABSL_FLAG(bool, json, false, "Print JSON instead of text.");
ABSL_FLAG(std::string, format, "q8_0",
          "Weight format to write: quantize q8_0 (default) or q4_0; synth f32, f16, bf16 or "
          "q8_0.");
