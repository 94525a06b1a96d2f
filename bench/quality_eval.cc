// Quality of the weight formats: perplexity on held-out text and top-1 (greedy)
// agreement with the model as stored, for each format the model's linear matrices are
// converted to (model/weight_format.h).
//
//   /usr/bin/python3 tools/heldout_files.py > /tmp/heldout.txt
//   bazel run //bench:quality_eval -- --model=$PWD/models/target \
//       --files=/tmp/heldout.txt --formats=bf16,f16,q8_0 --max_tokens=65536
//
// The text of the listed files is encoded as the training evaluation does
// (tools/train_models.py): BOS text EOS per file, concatenated, cut into windows of
// --window + 1 tokens; every position of a window predicts the next token.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/llama.h"
#include "model/output_consumers.h"
#include "model/tokenizer.h"
#include "model/weight_format.h"
#include "model/weights.h"

ABSL_FLAG(std::string, model, "models/target", "Hugging Face model directory");
ABSL_FLAG(std::string, files, "", "File listing the held-out text files, one path per line");
ABSL_FLAG(std::string, formats, "bf16,f16,q8_0", "Formats to compare with the stored model");
ABSL_FLAG(int, window, 256, "Tokens of context per window");
ABSL_FLAG(int, max_tokens, 65536, "Cap on the predicted tokens");
ABSL_FLAG(int, threads, 0, "CPU threads (0 = one per hardware thread)");

namespace tandem {
namespace {

void Check(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "quality_eval: %s\n", status.ToString().c_str());
    std::exit(1);
  }
}

std::vector<int32_t> HeldOutStream(const Tokenizer& tokenizer, const std::string& list) {
  std::ifstream paths(list);
  if (!paths) Check(absl::NotFoundError("cannot read --files=" + list));
  std::vector<int32_t> stream;
  std::string path;
  while (std::getline(paths, path)) {
    if (path.empty()) continue;
    std::ifstream file(path, std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    auto ids = tokenizer.Encode(text.str(), /*add_bos=*/true);
    if (!ids.ok()) continue;  // Not UTF-8: skipped, as the training script does.
    stream.insert(stream.end(), ids->begin(), ids->end());
    stream.push_back(tokenizer.eos_id());
  }
  return stream;
}

// Per window: the log-probability of each next token and each position's argmax.
struct Predictions {
  double nll = 0;
  std::vector<int32_t> argmax;
};

Predictions Predict(const LlamaWeights& weights, const std::vector<int32_t>& stream, int window,
                    int windows, int threads) {
  CpuBackend backend(threads);
  LlamaModelOptions options;
  options.max_batch_tokens = window;
  options.kv_cache_bytes = KvBytesPerBlock(weights.config.num_layers, options.block_size,
                                           weights.config.num_kv_heads, weights.config.head_dim) *
                           size_t(window / options.block_size + 2);
  auto model = LlamaModel::Create(weights, &backend, nullptr, options);
  Check(model.status());
  const int vocab = weights.config.vocab_size;
  Predictions out;
  std::vector<float> logits;
  for (int w = 0; w < windows; ++w) {
    SequenceInput input;
    input.seq_id = 1;
    input.tokens.assign(stream.begin() + size_t(w) * window,
                        stream.begin() + size_t(w + 1) * window);
    for (int i = 0; i < window; ++i) input.logit_indices.push_back(i);
    Check(ForwardToHost(**model, {input}, &logits));
    Check((*model)->Release(1));
    for (int i = 0; i < window; ++i) {
      const float* row = logits.data() + size_t(i) * vocab;
      int best = 0;
      for (int v = 1; v < vocab; ++v) {
        if (row[v] > row[best]) best = v;
      }
      const double max = row[best];
      double sum = 0;
      for (int v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - max);
      const int32_t next = stream[size_t(w) * window + i + 1];
      out.nll += std::log(sum) + max - row[next];
      out.argmax.push_back(best);
    }
  }
  return out;
}

int Main() {
  const std::string dir = absl::GetFlag(FLAGS_model);
  auto tokenizer = Tokenizer::Load(dir);
  Check(tokenizer.status());
  auto weights = LoadLlamaWeights(dir, 0, 1);
  Check(weights.status());
  const std::vector<int32_t> stream = HeldOutStream(*tokenizer, absl::GetFlag(FLAGS_files));
  const int window = absl::GetFlag(FLAGS_window);
  const int windows = static_cast<int>(
      std::min<size_t>((stream.size() - 1) / window, absl::GetFlag(FLAGS_max_tokens) / window));
  const double tokens = double(windows) * window;
  std::printf("%s: %zu held-out tokens, %d windows of %d (%.0f predictions)\n", dir.c_str(),
              stream.size(), windows, window, tokens);
  const Predictions reference =
      Predict(*weights, stream, window, windows, absl::GetFlag(FLAGS_threads));
  std::printf("%-8s %10s %10s %12s %14s\n", "format", "weights MB", "loss", "perplexity",
              "top-1 agreement");
  std::printf("%-8s %10.2f %10.4f %12.3f %14s\n", "stored", WeightBytes(*weights) / 1e6,
              reference.nll / tokens, std::exp(reference.nll / tokens), "1");
  const std::vector<std::string> formats =
      absl::StrSplit(absl::GetFlag(FLAGS_formats), ',', absl::SkipEmpty());
  for (const std::string& name : formats) {
    auto format = ParseWeightFormat(name);
    Check(format.status());
    auto converted = ConvertLinearWeights(*weights, *format);
    Check(converted.status());
    const Predictions p =
        Predict(*converted, stream, window, windows, absl::GetFlag(FLAGS_threads));
    int agree = 0;
    for (size_t i = 0; i < p.argmax.size(); ++i) agree += p.argmax[i] == reference.argmax[i];
    std::printf("%-8s %10.2f %10.4f %12.3f %14.4f\n", name.c_str(), WeightBytes(*converted) / 1e6,
                p.nll / tokens, std::exp(p.nll / tokens), agree / tokens);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
