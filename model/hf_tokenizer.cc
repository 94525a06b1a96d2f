#include "model/hf_tokenizer.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "model/bpe.h"
#include "model/utf8.h"

namespace tandem {
namespace internal {
namespace {

using nlohmann::json;

constexpr int kMaxVocabSize = 1 << 24;

absl::Status Invalid(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// A tokenizer_config.json token entry: "text" or {"content": "text", ...}.
std::string TokenContent(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return JsonString(*it, "content");
  return "";
}

bool IsAsciiWhitespace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Parse(absl::string_view tokenizer_json,
                                                                absl::string_view config_json,
                                                                const std::string& source) {
  json spec = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object()) return Invalid(source, "tokenizer.json is not a JSON object");
  json config = json::object();
  if (!config_json.empty()) {
    config = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) {
      return Invalid(source, "tokenizer_config.json is not a JSON object");
    }
  }
  std::unique_ptr<HfTokenizer> tokenizer(new HfTokenizer());
  if (!spec.contains("model") || !spec["model"].is_object()) {
    return Invalid(source, "tokenizer.json has no \"model\" object");
  }
  if (absl::Status s = tokenizer->ParseModel(spec["model"], source); !s.ok()) return s;
  const json added = spec.value("added_tokens", json::array());
  if (absl::Status s = tokenizer->ParseAddedTokens(added, source); !s.ok()) return s;
  absl::StatusOr<HfNormalizer> normalizer =
      HfNormalizer::Parse(spec.value("normalizer", json()), source);
  if (!normalizer.ok()) return normalizer.status();
  tokenizer->normalizer_ = *std::move(normalizer);
  absl::StatusOr<HfPreTokenizer> pre_tokenizer =
      HfPreTokenizer::Parse(spec.value("pre_tokenizer", json()), source);
  if (!pre_tokenizer.ok()) return pre_tokenizer.status();
  tokenizer->pre_tokenizer_ = *std::move(pre_tokenizer);
  absl::StatusOr<HfDecoder> decoder = HfDecoder::Parse(spec.value("decoder", json()), source);
  if (!decoder.ok()) return decoder.status();
  tokenizer->decoder_ = *std::move(decoder);
  tokenizer->FindBosEos(spec.value("post_processor", json()), config);
  return tokenizer;
}

absl::Status HfTokenizer::ParseModel(const json& model, const std::string& source) {
  if (JsonString(model, "type", "BPE") != "BPE") {
    return Invalid(source, absl::StrCat("model type \"", JsonString(model, "type"),
                                        "\" is not supported (supported: BPE)"));
  }
  if (!JsonString(model, "continuing_subword_prefix").empty() ||
      !JsonString(model, "end_of_word_suffix").empty()) {
    return Invalid(source, "BPE continuing_subword_prefix / end_of_word_suffix are not supported");
  }
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object() || vocab->empty()) {
    return Invalid(source, "model.vocab is missing or empty");
  }
  int size = 0;
  for (const auto& [piece, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<long long>() < 0 ||
        id.get<long long>() >= kMaxVocabSize) {
      return Invalid(source, absl::StrCat("model.vocab[\"", piece, "\"] is not an id in [0, ",
                                          kMaxVocabSize, ")"));
    }
    vocab_[piece] = id.get<int>();
    size = std::max(size, id.get<int>() + 1);
  }
  pieces_.assign(size, "");
  for (const auto& [piece, id] : vocab_) pieces_[id] = piece;
  byte_fallback_ = JsonBool(model, "byte_fallback", false);
  fuse_unk_ = JsonBool(model, "fuse_unk", false);
  ignore_merges_ = JsonBool(model, "ignore_merges", false);
  const std::string unk = JsonString(model, "unk_token");
  unk_id_ = unk.empty() ? -1 : VocabId(unk);
  if (!unk.empty() && unk_id_ < 0) {
    return Invalid(source, absl::StrCat("model.unk_token \"", unk, "\" is not in the vocabulary"));
  }
  return ParseMerges(model.value("merges", json::array()), source);
}

absl::Status HfTokenizer::ParseMerges(const json& merges, const std::string& source) {
  if (!merges.is_array()) return Invalid(source, "model.merges is not an array");
  merge_ranks_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& merge = merges[rank];
    std::string left, right;
    if (merge.is_string()) {  // "left right"
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ', 1);
      if (space == std::string::npos) {
        return Invalid(
            source, absl::StrCat("model.merges[", rank, "] \"", text, "\" is not \"left right\""));
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {  // ["left", "right"]
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return Invalid(source, absl::StrCat("model.merges[", rank, "] is not a pair of tokens"));
    }
    const int left_id = VocabId(left);
    const int right_id = VocabId(right);
    if (left_id < 0 || right_id < 0 || VocabId(left + right) < 0) {
      return Invalid(source, absl::StrCat("model.merges[", rank, "] (\"", left, "\", \"", right,
                                          "\") uses a token that is not in the vocabulary"));
    }
    merge_ranks_.emplace(std::make_pair(absl::string_view(vocab_.find(left)->first),
                                        absl::string_view(vocab_.find(right)->first)),
                         static_cast<int>(rank));
  }
  byte_values_.assign(pieces_.size(), -1);
  for (int byte = 0; byte < 256; ++byte) {
    const int id = VocabId(absl::StrFormat("<0x%02X>", byte));
    byte_ids_[byte] = id;
    if (id >= 0) byte_values_[id] = static_cast<int16_t>(byte);
  }
  return absl::OkStatus();
}

absl::Status HfTokenizer::ParseAddedTokens(const json& added, const std::string& source) {
  if (!added.is_array()) return Invalid(source, "added_tokens is not an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& token = added[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!token.is_object() || !token.contains("id") || !token["id"].is_number_integer() ||
        token["id"].get<long long>() < 0 || token["id"].get<long long>() >= kMaxVocabSize ||
        JsonString(token, "content").empty()) {
      return Invalid(source, where + " needs an id in [0, 2^24) and a non-empty content");
    }
    if (JsonBool(token, "single_word", false)) {
      return Invalid(source, where + ": single_word added tokens are not supported");
    }
    const int id = token["id"].get<int>();
    const std::string content = JsonString(token, "content");
    added_tokens_.push_back(
        {id, content, JsonBool(token, "lstrip", false), JsonBool(token, "rstrip", false)});
    added_ids_[content] = id;
    added_first_bytes_[static_cast<unsigned char>(content[0])] = true;
    if (id >= static_cast<int>(pieces_.size())) {
      pieces_.resize(id + 1);
      byte_values_.resize(id + 1, -1);
    }
    pieces_[id] = content;
    special_.resize(pieces_.size(), false);
    special_[id] = JsonBool(token, "special", false);
  }
  special_.resize(pieces_.size(), false);
  std::stable_sort(
      added_tokens_.begin(), added_tokens_.end(),
      [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  return absl::OkStatus();
}

void HfTokenizer::FindBosEos(const json& post_processor, const json& config) {
  // A TemplateProcessing whose single-text template starts with a special token adds
  // that token as BOS; otherwise tokenizer_config.json's bos_token names it.
  if (post_processor.is_object() && JsonString(post_processor, "type") == "TemplateProcessing") {
    const json single = post_processor.value("single", json::array());
    if (single.is_array() && !single.empty() && single[0].contains("SpecialToken")) {
      bos_id_ = PieceToId(JsonString(single[0]["SpecialToken"], "id"));
    }
  }
  if (bos_id_ < 0) bos_id_ = PieceToId(TokenContent(config, "bos_token"));
  eos_id_ = PieceToId(TokenContent(config, "eos_token"));
}

int HfTokenizer::VocabId(absl::string_view piece) const {
  const auto it = vocab_.find(piece);
  return it == vocab_.end() ? -1 : it->second;
}

int HfTokenizer::PieceToId(absl::string_view piece) const {
  if (piece.empty()) return -1;
  const auto it = added_ids_.find(piece);
  return it != added_ids_.end() ? it->second : VocabId(piece);
}

std::vector<HfTokenizer::Segment> HfTokenizer::SplitAddedTokens(absl::string_view text) const {
  std::vector<Segment> segments;
  size_t text_begin = 0;  // Start of the current plain-text stretch.
  size_t at = 0;
  while (at < text.size()) {
    const AddedToken* match = nullptr;
    if (added_first_bytes_[static_cast<unsigned char>(text[at])]) {
      for (const AddedToken& token : added_tokens_) {  // Longest first.
        if (absl::StartsWith(text.substr(at), token.content)) {
          match = &token;
          break;
        }
      }
    }
    if (match == nullptr) {
      ++at;
      continue;
    }
    size_t text_end = at;
    if (match->lstrip) {
      while (text_end > text_begin && IsAsciiWhitespace(text[text_end - 1])) --text_end;
    }
    if (text_end > text_begin) {
      segments.push_back({text.substr(text_begin, text_end - text_begin), -1});
    }
    segments.push_back({text.substr(at, match->content.size()), match->id});
    at += match->content.size();
    if (match->rstrip) {
      while (at < text.size() && IsAsciiWhitespace(text[at])) ++at;
    }
    text_begin = at;
  }
  if (text_begin < text.size()) segments.push_back({text.substr(text_begin), -1});
  return segments;
}

std::vector<int> HfTokenizer::Encode(absl::string_view text) const {
  std::vector<int> ids;
  bool first_segment = true;
  for (const Segment& segment : SplitAddedTokens(text)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
    } else {
      const std::string normalized = normalizer_.Apply(segment.text);
      for (const std::string& word : pre_tokenizer_.Split(normalized, first_segment)) {
        EncodeWord(word, &ids);
      }
    }
    first_segment = false;
  }
  return ids;
}

void HfTokenizer::EncodeWord(absl::string_view word, std::vector<int>* ids) const {
  if (ignore_merges_) {
    const int id = VocabId(word);
    if (id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  std::vector<MergeSymbol> symbols;
  for (size_t begin = 0; begin < word.size();) {
    const size_t length = std::max<size_t>(1, Utf8CharLength(word.substr(begin)));
    symbols.push_back({begin, length, false});
    begin += length;
  }
  symbols = MergeByPriority(
      word, std::move(symbols),
      [this](absl::string_view left, absl::string_view right) -> std::optional<float> {
        const auto rank = merge_ranks_.find(std::make_pair(left, right));
        if (rank == merge_ranks_.end()) return std::nullopt;
        return -static_cast<float>(rank->second);
      });
  bool previous_unknown = false;
  for (const MergeSymbol& symbol : symbols) {
    const absl::string_view piece = word.substr(symbol.begin, symbol.length);
    const int id = VocabId(piece);
    if (id >= 0) {
      ids->push_back(id);
      previous_unknown = false;
      continue;
    }
    std::vector<int> bytes;
    for (const char byte : piece) {
      const int byte_id = byte_fallback_ ? byte_ids_[static_cast<unsigned char>(byte)] : -1;
      if (byte_id < 0) break;
      bytes.push_back(byte_id);
    }
    if (bytes.size() == piece.size()) {
      ids->insert(ids->end(), bytes.begin(), bytes.end());
      previous_unknown = false;
    } else if (unk_id_ >= 0) {
      if (!(fuse_unk_ && previous_unknown)) ids->push_back(unk_id_);
      previous_unknown = true;
    }  // Without an unknown token the character is dropped, as Hugging Face does.
  }
}

std::string HfTokenizer::RawBytes(int id) const {
  return special_[id] ? std::string() : decoder_.RawBytes(pieces_[id]);
}

std::string HfTokenizer::Decode(absl::Span<const int> ids, bool at_text_start) const {
  std::vector<absl::string_view> tokens;
  tokens.reserve(ids.size());
  for (const int id : ids) {
    if (!special_[id]) tokens.push_back(pieces_[id]);
  }
  return decoder_.Decode(tokens, at_text_start);
}

}  // namespace internal
}  // namespace tandem
