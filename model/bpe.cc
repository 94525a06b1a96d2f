#include "model/bpe.h"

#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "model/utf8.h"

namespace tandem {
namespace internal {
namespace {

constexpr absl::string_view kSpaceSymbol = "\xE2\x96\x81";           // U+2581 "▁"
constexpr absl::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Length of the character at the start of `text` (which is well-formed; 1 for a
// malformed byte only guarantees progress).
size_t CharLength(absl::string_view text) {
  const size_t length = Utf8CharLength(text);
  return length > 0 ? length : 1;
}

// Length of the normalisation unit at the start of `text`: a user-defined piece
// (the longest that matches) or one character.
size_t UnitLength(const SentencePieceModel& model, absl::string_view text) {
  const size_t user_defined = model.MatchUserDefined(text);
  return user_defined > 0 ? user_defined : CharLength(text);
}

// A symbol in the merge loop's linked list; length 0 once merged into its left
// neighbour.
struct LinkedSymbol {
  int prev;
  int next;
  MergeSymbol span;
};

// A possible merge of adjacent symbols `left` and `right`, valid while their
// lengths still add up to `length`.
struct Candidate {
  float priority;
  int left;
  int right;
  size_t length;
};

// Orders the queue: highest priority first, then the leftmost.
struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  }
};

}  // namespace

std::string Normalize(const SentencePieceModel& model, absl::string_view text) {
  const bool remove_extra = model.remove_extra_whitespaces();
  if (remove_extra) {
    while (!text.empty()) {
      const size_t length = UnitLength(model, text);
      if (text.substr(0, length) != " ") break;
      text.remove_prefix(length);
    }
  }
  std::string normalized;
  if (text.empty()) return normalized;
  const absl::string_view space = model.escape_whitespaces() ? kSpaceSymbol : " ";
  normalized.reserve(text.size() * 3 + space.size());
  if (model.add_dummy_prefix()) normalized.append(space.data(), space.size());
  bool previous_is_space = remove_extra;
  while (!text.empty()) {
    const size_t length = UnitLength(model, text);
    absl::string_view unit = text.substr(0, length);
    text.remove_prefix(length);
    if (previous_is_space) {
      while (absl::ConsumePrefix(&unit, " ")) {
      }
    }
    if (!unit.empty()) {
      for (const char c : unit) {
        if (c == ' ') {
          normalized.append(space.data(), space.size());
        } else {
          normalized.push_back(c);
        }
      }
      previous_is_space = unit.back() == ' ';
    }
    if (!remove_extra) previous_is_space = false;
  }
  if (remove_extra) {
    while (absl::EndsWith(normalized, space)) {
      normalized.resize(normalized.size() - space.size());
    }
  }
  return normalized;
}

std::vector<MergeSymbol> MergeByPriority(absl::string_view text, std::vector<MergeSymbol> spans,
                                         MergePriority priority) {
  if (spans.empty()) return spans;
  std::vector<LinkedSymbol> symbols;
  symbols.reserve(spans.size());
  for (const MergeSymbol& span : spans) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, index + 1, span});
  }
  symbols.back().next = -1;
  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const MergeSymbol& a = symbols[left].span;
    const MergeSymbol& b = symbols[right].span;
    if (a.frozen || b.frozen) return;
    const std::optional<float> p =
        priority(text.substr(a.begin, a.length), text.substr(b.begin, b.length));
    if (p.has_value()) queue.push({*p, left, right, a.length + b.length});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    LinkedSymbol& left = symbols[top.left];
    LinkedSymbol& right = symbols[top.right];
    // Stale: one side was merged away or grew since the candidate was queued.
    if (left.span.length == 0 || right.span.length == 0 ||
        left.span.length + right.span.length != top.length) {
      continue;
    }
    left.span.length = top.length;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.span.length = 0;
    consider(left.prev, top.left);
    consider(top.left, left.next);
  }
  std::vector<MergeSymbol> merged;
  for (int index = 0; index >= 0; index = symbols[index].next)
    merged.push_back(symbols[index].span);
  return merged;
}

std::vector<int> EncodeNormalized(const SentencePieceModel& model, absl::string_view normalized) {
  std::vector<MergeSymbol> initial;
  for (size_t begin = 0; begin < normalized.size();) {
    const absl::string_view rest = normalized.substr(begin);
    const size_t user_defined = model.MatchUserDefined(rest);
    const size_t length = user_defined > 0 ? user_defined : CharLength(rest);
    initial.push_back({begin, length, user_defined > 0});
    begin += length;
  }
  // Where an unused piece came from: the last pair seen to spell it.
  absl::flat_hash_map<absl::string_view, std::pair<absl::string_view, absl::string_view>>
      unused_origin;
  const std::vector<MergeSymbol> symbols =
      MergeByPriority(normalized, std::move(initial),
                      [&](absl::string_view left, absl::string_view right) -> std::optional<float> {
                        const absl::string_view merged(left.data(), left.size() + right.size());
                        const int id = model.FindMergeable(merged);
                        if (id < 0) return std::nullopt;
                        if (model.type(id) == PieceType::kUnused)
                          unused_origin[merged] = {left, right};
                        return model.score(id);
                      });

  // Final pieces, unused ones split back (depth first, left to right).
  std::vector<std::pair<absl::string_view, int>> pieces;
  std::vector<absl::string_view> stack;
  for (const MergeSymbol& symbol : symbols) {
    stack.push_back(normalized.substr(symbol.begin, symbol.length));
    while (!stack.empty()) {
      const absl::string_view piece = stack.back();
      stack.pop_back();
      const int id = model.PieceToId(piece);
      const auto origin =
          model.type(id) == PieceType::kUnused ? unused_origin.find(piece) : unused_origin.end();
      if (origin == unused_origin.end()) {
        pieces.emplace_back(piece, id);
      } else {
        stack.push_back(origin->second.second);
        stack.push_back(origin->second.first);
      }
    }
  }

  std::vector<int> ids;
  ids.reserve(pieces.size());
  bool previous_unknown = false;
  for (const auto& [piece, id] : pieces) {
    const bool unknown = id == model.unk_id();
    if (unknown && model.byte_fallback()) {
      for (const char byte : piece) ids.push_back(model.byte_id(static_cast<uint8_t>(byte)));
    } else if (!(unknown && previous_unknown)) {
      ids.push_back(id);  // A run of unknown symbols is one unknown token.
    }
    previous_unknown = unknown;
  }
  return ids;
}

std::string DecodeIds(const SentencePieceModel& model, absl::Span<const int> ids,
                      bool at_text_start) {
  std::string text;
  std::string bytes;  // The current run of byte pieces.
  auto flush_bytes = [&] {
    absl::string_view rest = bytes;
    while (!rest.empty()) {
      const size_t length = Utf8CharLength(rest);
      if (length == 0) {
        text.append(kReplacementCharacter.data(), kReplacementCharacter.size());
        rest.remove_prefix(1);
      } else {
        text.append(rest.data(), length);
        rest.remove_prefix(length);
      }
    }
    bytes.clear();
  };
  const bool strip_leading_space = model.add_dummy_prefix() || model.remove_extra_whitespaces();
  bool at_start = at_text_start;  // Still expecting the dummy-prefix space.
  bool stripped_space = false;    // The previous piece lost its leading "▁".
  for (const int id : ids) {
    const PieceType type = model.type(id);
    if (type == PieceType::kByte) {
      bytes.push_back(static_cast<char>(model.byte_value(id)));
      continue;
    }
    flush_bytes();
    if (stripped_space || !text.empty()) at_start = false;
    stripped_space = false;
    if (type == PieceType::kControl) continue;
    if (type == PieceType::kUnknown) {
      text += model.unk_surface();
      continue;
    }
    absl::string_view piece = model.piece(id);
    if (at_start && strip_leading_space) {
      // With remove_extra_whitespaces every leading "▁" goes, not only the first.
      stripped_space =
          absl::ConsumePrefix(&piece, kSpaceSymbol) && !model.remove_extra_whitespaces();
    }
    text += absl::StrReplaceAll(piece, {{kSpaceSymbol, " "}});
  }
  flush_bytes();
  return text;
}

}  // namespace internal
}  // namespace tandem
