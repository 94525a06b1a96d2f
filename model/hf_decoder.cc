#include "model/hf_decoder.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "model/hf_pretokenizer.h"
#include "model/utf8.h"

namespace tandem {
namespace internal {
namespace {

using nlohmann::json;

// The code point of the one-character `text` below U+0800, or -1.
int SmallCodePoint(absl::string_view text, size_t length) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  if (length == 1) return b[0];
  if (length == 2) return ((b[0] & 0x1F) << 6) | (b[1] & 0x3F);
  return -1;
}

}  // namespace

int ParseByteToken(absl::string_view token) {
  int byte = 0;
  if (token.size() != 6 || !absl::StartsWith(token, "<0x") || token[5] != '>' ||
      !absl::SimpleHexAtoi(token.substr(3, 2), &byte)) {
    return -1;
  }
  return byte;
}

absl::StatusOr<HfDecoder> HfDecoder::Parse(const json& spec, const std::string& source) {
  HfDecoder decoder;
  if (absl::Status status = decoder.AddSteps(spec, source); !status.ok()) return status;
  return decoder;
}

absl::Status HfDecoder::AddSteps(const json& spec, const std::string& source) {
  if (spec.is_null()) return absl::OkStatus();
  const std::string type = spec.is_object() ? JsonString(spec, "type") : "";
  const json pattern = spec.is_object() ? spec.value("pattern", json()) : json();
  if (type == "Sequence" && spec.contains("decoders") && spec["decoders"].is_array()) {
    for (const json& step : spec["decoders"]) {
      if (absl::Status status = AddSteps(step, source); !status.ok()) return status;
    }
  } else if (type == "ByteLevel") {
    byte_level_ = true;
  } else if (type == "ByteFallback") {
    byte_fallback_ = true;
  } else if (type == "Fuse") {
    // Decoded text is always one string.
  } else if (type == "Replace" && pattern.is_object() && pattern.contains("String") &&
             pattern["String"].is_string() && !pattern["String"].get<std::string>().empty()) {
    replacements_.emplace_back(pattern["String"].get<std::string>(), JsonString(spec, "content"));
  } else if (type == "Strip" && spec.value("stop", 0) == 0 &&
             !JsonString(spec, "content").empty()) {
    strip_content_ = JsonString(spec, "content");
    strip_count_ = spec.value("start", 0);
  } else if (type == "Metaspace") {
    replacements_.emplace_back(JsonString(spec, "replacement", "\xE2\x96\x81"), " ");
    const bool legacy_prefix = JsonBool(spec, "add_prefix_space", true);
    if (JsonString(spec, "prepend_scheme", legacy_prefix ? "always" : "never") != "never") {
      strip_content_ = " ";
      strip_count_ = 1;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": decoder \"", type.empty() ? spec.dump() : type,
        "\" is not supported (supported: ByteLevel, ByteFallback, Fuse, Replace with a String, "
        "Strip at the start, Metaspace, Sequence)"));
  }
  return absl::OkStatus();
}

int HfDecoder::FallbackByte(absl::string_view token) const {
  return byte_fallback_ ? ParseByteToken(token) : -1;
}

std::string HfDecoder::RawBytes(absl::string_view token) const {
  if (byte_level_) {
    // Every character must stand for a byte; otherwise (an added token spelled outside
    // the alphabet) the token's own UTF-8 is used, as Hugging Face does.
    std::string bytes;
    for (absl::string_view rest = token; !rest.empty();) {
      const size_t length = Utf8CharLength(rest);
      const int code_point = SmallCodePoint(rest, length);
      const int byte = code_point >= 0 ? ByteLevelByte(code_point) : -1;
      if (byte < 0) return std::string(token);
      bytes.push_back(static_cast<char>(byte));
      rest.remove_prefix(length);
    }
    return bytes;
  }
  const int byte = FallbackByte(token);
  if (byte >= 0) return std::string(1, static_cast<char>(byte));
  std::string text(token);
  for (const auto& [pattern, content] : replacements_) {
    text = absl::StrReplaceAll(text, {{pattern, content}});
  }
  return text;
}

std::string HfDecoder::Decode(absl::Span<const absl::string_view> tokens,
                              bool at_text_start) const {
  std::string text;
  std::string run;  // Byte-level: all bytes; byte fallback: the current run of byte tokens.
  for (const absl::string_view token : tokens) {
    if (byte_level_ || FallbackByte(token) >= 0) {
      run += RawBytes(token);
      continue;
    }
    AppendUtf8Lossy(run, &text);
    run.clear();
    text += RawBytes(token);
  }
  AppendUtf8Lossy(run, &text);
  if (at_text_start) {
    absl::string_view rest = text;
    for (int i = 0; i < strip_count_ && absl::ConsumePrefix(&rest, strip_content_); ++i) {
    }
    text.erase(0, text.size() - rest.size());
  }
  return text;
}

}  // namespace internal
}  // namespace tandem
