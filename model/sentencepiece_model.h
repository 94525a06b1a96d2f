// Thin wrapper over libsentencepiece's processor with a std-only interface.
// libsentencepiece's header declares `absl::string_view` as std::string_view, which
// clashes with Abseil's own string_view; keeping it behind this header lets the rest
// of the code use Abseil freely. Internal to the tokenizer library.
#ifndef TANDEM_MODEL_SENTENCEPIECE_MODEL_H_
#define TANDEM_MODEL_SENTENCEPIECE_MODEL_H_

#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace tandem {
namespace internal {

class SentencePieceModel {
 public:
  SentencePieceModel();
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  // Each returns false and sets `error` on failure. Const methods are thread-safe.
  bool Load(const std::string& path, std::string* error);
  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  // Ids must be in [0, vocab_size).
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;

  int vocab_size() const;
  int bos_id() const;  // -1 when the model has none.
  int eos_id() const;
  int unk_id() const;
  bool IsControl(int id) const;
  bool IsUnknown(int id) const;
  bool IsUnused(int id) const;
  bool IsByte(int id) const;
  std::string IdToPiece(int id) const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_MODEL_SENTENCEPIECE_MODEL_H_
