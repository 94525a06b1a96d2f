#include "client/quantize_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "client/shared_flags.h"
#include "model/quantize_model.h"

namespace tandem::client {
namespace {

int RunQuantize(const Invocation& inv) {
  if (inv.positional.size() != 2) {
    std::fprintf(stderr,
                 "tandem quantize: give IN_DIR and OUT_DIR; see `tandem quantize --help`\n");
    return 2;
  }
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "q8_0" && format != "q4_0") {
    std::fprintf(stderr, "tandem quantize: unknown --format=%s (q8_0 or q4_0)\n", format.c_str());
    return 2;
  }
  auto report = QuantizeModelDir(inv.positional[0], inv.positional[1],
                                 format == "q4_0" ? DType::kQ4_0 : DType::kQ8_0);
  if (!report.ok()) {
    std::fprintf(stderr, "tandem quantize: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  std::printf("%s: %d matrices as %s, %d tensors kept; %.1f MB -> %.1f MB of tensors\n",
              inv.positional[1].c_str(), report->quantized_tensors, format.c_str(),
              report->kept_tensors, report->input_bytes / 1e6, report->output_bytes / 1e6);
  return 0;
}

}  // namespace

Command QuantizeCommand() {
  Command command;
  command.name = "quantize";
  command.summary = "write a q8_0 or q4_0 (8/4-bit block-quantized) copy of a model directory";
  command.usage =
      "Usage: tandem quantize [flags] IN_DIR OUT_DIR\n\n"
      "Reads the Hugging Face Llama model in IN_DIR and writes OUT_DIR/model.safetensors with\n"
      "every linear-layer matrix in q8_0 (blocks of 32 values of a row: int8 quants and one\n"
      "f16 scale per block) or, with --format=q4_0, in q4_0 (the same blocks with 4-bit\n"
      "quants, two per byte; layouts in docs/architecture.md) and the embedding and norms as\n"
      "stored, plus a copy of IN_DIR's other files (config, tokenizer). Serve OUT_DIR like\n"
      "any model directory.";
  command.flags = {{"format", "FORMAT", "Weight format to write: q8_0 (default) or q4_0."}};
  command.run = RunQuantize;
  return command;
}

}  // namespace tandem::client
