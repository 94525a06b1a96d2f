// libFuzzer target: the bundled target model's tokenizer (or any model directory's,
// tokenizer.json included) on arbitrary bytes.
//  * Encode: valid UTF-8 gives ids in range (BOS first, if any); anything else is
//    INVALID_ARGUMENT.
//  * Decode of arbitrary ids (some out of range): OK exactly when every id is in
//    range, and then the text is valid UTF-8.
//  * IncrementalDetokenizer: fed the ids in arbitrary chunks, every delta is valid
//    UTF-8 and the deltas plus Flush() equal Decode (its documented contract).
// The tokenizer is read from $TANDEM_FUZZ_TOKENIZER, else models/target.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "model/tokenizer.h"

namespace {

const tandem::Tokenizer& Shared() {
  static const tandem::Tokenizer* tokenizer = [] {
    const char* path = std::getenv("TANDEM_FUZZ_TOKENIZER");
    auto loaded = tandem::Tokenizer::Load(path != nullptr ? path : "models/target");
    if (!loaded.ok()) {
      std::fprintf(stderr, "tokenizer_fuzzer: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    return new tandem::Tokenizer(*std::move(loaded));
  }();
  return *tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tandem::Tokenizer& tokenizer = Shared();
  const absl::string_view text(reinterpret_cast<const char*>(data), size);

  auto ids = tokenizer.Encode(text, /*add_bos=*/true);
  if (tandem::IsValidUtf8(text)) {
    FUZZ_CHECK(ids.ok());
    // BOS first when the model has one (Qwen's tokenizer.json has none).
    FUZZ_CHECK(tokenizer.bos_id() < 0 || (!ids->empty() && (*ids)[0] == tokenizer.bos_id()));
    for (int id : *ids) FUZZ_CHECK(tokenizer.IsValidId(id));
    auto decoded = tokenizer.Decode(*ids);
    FUZZ_CHECK(decoded.ok() && tandem::IsValidUtf8(*decoded));
  } else {
    FUZZ_CHECK(!ids.ok() && ids.status().code() == absl::StatusCode::kInvalidArgument);
  }

  // The same bytes as token ids: two bytes each, a few past the vocabulary.
  std::vector<int> raw;
  bool all_valid = true;
  for (size_t i = 0; i + 1 < size; i += 2) {
    const int id = (data[i] | (data[i + 1] << 8)) % (tokenizer.vocab_size() + 4) - 2;
    raw.push_back(id);
    all_valid &= tokenizer.IsValidId(id);
  }
  auto decoded = tokenizer.Decode(raw);
  FUZZ_CHECK(decoded.ok() == all_valid);
  if (decoded.ok()) FUZZ_CHECK(tandem::IsValidUtf8(*decoded));

  // Streaming: chunk sizes from the bytes; invalid ids are refused without effect.
  std::vector<int> kept;
  for (int id : raw) {
    if (tokenizer.IsValidId(id)) kept.push_back(id);
  }
  auto whole = tokenizer.Decode(kept);
  FUZZ_CHECK(whole.ok());
  tandem::IncrementalDetokenizer detokenizer(&tokenizer);
  std::string streamed;
  size_t pos = 0, step = 0;
  while (pos < raw.size()) {
    const size_t n = std::min<size_t>(raw.size() - pos, 1 + data[step++ % size] % 4);
    std::vector<int> chunk(raw.begin() + pos, raw.begin() + pos + n);
    bool chunk_valid = true;
    for (int id : chunk) chunk_valid &= tokenizer.IsValidId(id);
    auto delta = detokenizer.Add(chunk);
    FUZZ_CHECK(delta.ok() == chunk_valid);
    if (!delta.ok()) {
      // Refused whole: feed its valid ids instead so `kept` stays the reference.
      std::vector<int> valid;
      for (int id : chunk) {
        if (tokenizer.IsValidId(id)) valid.push_back(id);
      }
      delta = detokenizer.Add(valid);
      FUZZ_CHECK(delta.ok());
    }
    FUZZ_CHECK(tandem::IsValidUtf8(*delta));
    streamed += *delta;
    pos += n;
  }
  const std::string rest = detokenizer.Flush();
  FUZZ_CHECK(tandem::IsValidUtf8(rest));
  streamed += rest;
  FUZZ_CHECK(streamed == *whole);
  return 0;
}
