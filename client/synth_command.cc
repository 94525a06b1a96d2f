#include "client/synth_command.h"

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "client/shared_flags.h"
#include "model/synthetic_model_dir.h"
#include "model/weight_format.h"

ABSL_FLAG(std::string, shape, "llama-2-7b", "Synthetic model shape.");
ABSL_FLAG(int, vocab, 0, "Vocabulary size; 0 = --tokenizer-from's, else the shape's.");
ABSL_FLAG(std::string, tokenizer_from, "", "Model directory to take the tokenizer from.");

namespace tandem::client {
namespace {

int RunSynth(const Invocation& inv) {
  if (inv.positional.size() != 1) {
    std::fprintf(stderr, "tandem synth: give one OUT_DIR; see `tandem synth --help`\n");
    return 2;
  }
  auto format = ParseWeightFormat(absl::GetFlag(FLAGS_format));
  if (!format.ok()) {
    std::fprintf(stderr, "tandem synth: %s\n", std::string(format.status().message()).c_str());
    return 2;
  }
  SyntheticModelDirOptions options;
  options.shape = absl::GetFlag(FLAGS_shape);
  options.vocab_size = absl::GetFlag(FLAGS_vocab);
  options.tokenizer_from = absl::GetFlag(FLAGS_tokenizer_from);
  options.format = *format;
  options.seed = absl::GetFlag(FLAGS_seed).value_or(0);
  const std::string& out_dir = inv.positional[0];
  auto report = WriteSyntheticModelDir(options, out_dir);
  if (!report.ok()) {
    std::fprintf(stderr, "tandem synth: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  const LlamaConfig& c = report->config;
  std::printf(
      "%s: synthetic %s (random weights, NOT A MODEL), %d layers, hidden %d, %d/%d heads, "
      "MLP %d, vocabulary %d, %.2f B parameters; %d tensors, %.2f GB, linear matrices %s; "
      "tokenizer files: %s\n",
      out_dir.c_str(), options.shape.c_str(), c.num_layers, c.hidden_size, c.num_heads,
      c.num_kv_heads, c.intermediate_size, c.vocab_size, c.NumParameters() / 1e9, report->tensors,
      report->tensor_bytes / 1e9, DTypeName(options.format),
      report->copied_files.empty() ? "none" : absl::StrJoin(report->copied_files, ", ").c_str());
  return 0;
}

}  // namespace

Command SynthCommand() {
  Command command;
  command.name = "synth";
  command.summary = "write a random-weight model directory of a real shape (benchmarks only)";
  command.usage =
      "Usage: tandem synth [flags] OUT_DIR\n\n"
      "Writes OUT_DIR/config.json and OUT_DIR/model.safetensors of a synthetic model: the\n"
      "shapes of a real model (llama-1b: the TinyLlama-1.1B body; llama-2-7b; llama-2-70b;\n"
      "tiny) filled with seeded random values -- NOT A MODEL, its output is meaningless; use\n"
      "it to measure memory and speed, e.g. a 7B-shape q8_0 draft next to the bundled\n"
      "target: tandem synth --shape llama-2-7b --tokenizer-from models/target --format q8_0\n"
      "/tmp/draft-7b, then tandem up --draft /tmp/draft-7b. The linear matrices are written\n"
      "in --format (embedding and norms in bf16), one tensor at a time (memory: about one\n"
      "tensor). --tokenizer-from copies a model directory's tokenizer files and takes its\n"
      "vocabulary size and BOS/EOS ids. OUT_DIR must not hold a model already.";
  command.flags = {
      {"shape", "NAME", "llama-1b, llama-2-7b, llama-2-70b or tiny."},
      {"vocab", "N", "Vocabulary size; 0 = --tokenizer-from's, else the shape's own."},
      {"tokenizer_from", "DIR", "Model directory whose tokenizer (and vocabulary) to use."},
      {"format", "FORMAT", "Weight format of the linear matrices: f32, f16, bf16 or q8_0."},
      {"seed", "N", "Seed of the random values (default 0); the same seed writes the same file."},
  };
  command.run = RunSynth;
  return command;
}

}  // namespace tandem::client
