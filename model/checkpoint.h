// A Hugging Face model directory's tensors: `model.safetensors`, or the shards named
// by `model.safetensors.index.json` ({"weight_map": {"<tensor>": "<shard file>"}}).
#ifndef TANDEM_MODEL_CHECKPOINT_H_
#define TANDEM_MODEL_CHECKPOINT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/safetensors.h"

namespace tandem {

class Checkpoint {
 public:
  // Opens `model_dir`. A single model.safetensors wins over an index. Every shard of
  // an index is mapped once and must exist, be valid and hold the tensors the index
  // assigns to it. Errors: NOT_FOUND when neither file exists (or a shard is
  // missing), INVALID_ARGUMENT for malformed files; all name the directory/file.
  static absl::StatusOr<Checkpoint> Open(const std::string& model_dir);

  const std::string& dir() const { return dir_; }
  // All tensor names, sorted.
  std::vector<std::string> TensorNames() const;
  bool Contains(absl::string_view name) const;
  // A view of the named tensor (kept alive by its `owner`), or NOT_FOUND naming the
  // directory and tensor.
  absl::StatusOr<SafetensorsTensorView> Find(absl::string_view name) const;
  // Path of the file holding `name` ("" when absent), for error messages.
  std::string FileOf(absl::string_view name) const;

 private:
  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*, std::less<>> tensor_to_file_;
};

}  // namespace tandem

#endif  // TANDEM_MODEL_CHECKPOINT_H_
