#include "model/quantize_model.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/backend.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/float16.h"
#include "model/q4_0.h"
#include "model/q8_0.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// One tensor of the output file and where its bytes come from.
struct OutputTensor {
  std::string name;
  SafetensorsDType dtype;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::string source;  // Input tensor name.
  enum { kCopy, kQuants, kScales } part = kCopy;
};

bool IsLinearMatrix(const SafetensorsTensorView& view) {
  return view.shape.size() == 2 &&
         (absl::EndsWith(view.name, "_proj.weight") || view.name == "lm_head.weight");
}

// Row `row` of a F32/F16/BF16 matrix view as float32.
void WidenRow(const SafetensorsTensorView& view, int64_t row, std::vector<float>* out) {
  const int64_t cols = view.shape[1];
  out->resize(cols);
  const auto* base = static_cast<const uint8_t*>(view.data);
  for (int64_t k = 0; k < cols; ++k) {
    const int64_t i = row * cols + k;
    if (view.dtype == SafetensorsDType::kF32) {
      std::memcpy(&(*out)[k], base + 4 * i, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, base + 2 * i, 2);
      (*out)[k] = view.dtype == SafetensorsDType::kF16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
    }
  }
}

// Quantizes a whole matrix view to `format` (q8_0 or q4_0) into the stored quant bytes
// and scales.
void QuantizeMatrix(const SafetensorsTensorView& view, DType format, std::vector<uint8_t>* quants,
                    std::vector<uint16_t>* scales) {
  const int64_t rows = view.shape[0], cols = view.shape[1], blocks = Q8BlocksPerRow(cols);
  const int64_t row_bytes = StoredRowBytes(format, cols);
  quants->resize(rows * row_bytes);
  scales->resize(rows * blocks);
  std::vector<float> row;
  for (int64_t r = 0; r < rows; ++r) {
    WidenRow(view, r, &row);
    uint8_t* out = quants->data() + r * row_bytes;
    if (format == DType::kQ4_0) {
      QuantizeQ4Row(row.data(), cols, out, scales->data() + r * blocks);
    } else {
      QuantizeQ8Row(row.data(), cols, reinterpret_cast<int8_t*>(out), scales->data() + r * blocks);
    }
  }
}

absl::StatusOr<std::vector<OutputTensor>> PlanOutput(const Checkpoint& checkpoint, DType format,
                                                     QuantizeReport* report) {
  std::vector<OutputTensor> plan;
  for (const std::string& name : checkpoint.TensorNames()) {
    auto view = checkpoint.Find(name);
    if (!view.ok()) return view.status();
    if (view->dtype == SafetensorsDType::kI8 || view->dtype == SafetensorsDType::kU8) {
      return absl::InvalidArgumentError(absl::StrCat(checkpoint.FileOf(name), ": tensor \"", name,
                                                     "\" is ", SafetensorsDTypeName(view->dtype),
                                                     ": the model is already quantized"));
    }
    report->input_bytes += view->size_bytes;
    const bool floating = view->dtype == SafetensorsDType::kF32 ||
                          view->dtype == SafetensorsDType::kF16 ||
                          view->dtype == SafetensorsDType::kBF16;
    if (!floating || !IsLinearMatrix(*view)) {
      plan.push_back({name, view->dtype, view->shape, view->size_bytes, name, OutputTensor::kCopy});
      ++report->kept_tensors;
      continue;
    }
    const int64_t rows = view->shape[0], cols = view->shape[1];
    const int64_t row_bytes = StoredRowBytes(format, cols);
    plan.push_back({name,
                    format == DType::kQ4_0 ? SafetensorsDType::kU8 : SafetensorsDType::kI8,
                    {rows, row_bytes},
                    uint64_t(rows * row_bytes),
                    name,
                    OutputTensor::kQuants});
    plan.push_back({name + "_scale",
                    SafetensorsDType::kF16,
                    {rows, Q8BlocksPerRow(cols)},
                    uint64_t(rows * Q8BlocksPerRow(cols) * 2),
                    name,
                    OutputTensor::kScales});
    ++report->quantized_tensors;
  }
  return plan;
}

std::string Header(const std::vector<OutputTensor>& plan, DType format) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"},
                            {"tandem_weight_format", DTypeName(format)},
                            {"tandem_block_size", std::to_string(kQ8BlockSize)}};
  uint64_t offset = 0;
  for (const OutputTensor& t : plan) {
    header[t.name] = {{"dtype", SafetensorsDTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

absl::Status WriteCheckpoint(const Checkpoint& checkpoint, const std::vector<OutputTensor>& plan,
                             DType format, const std::string& path, QuantizeReport* report) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  auto fail = [&] { return absl::InternalError(absl::StrCat("cannot write ", path)); };
  if (file == nullptr) return fail();
  const std::string header = Header(plan, format);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = uint8_t((uint64_t(header.size()) >> (8 * i)) & 0xff);
  auto write = [&](const void* data, size_t bytes) {
    return bytes == 0 || std::fwrite(data, 1, bytes, file.get()) == bytes;
  };
  if (!write(length, 8) || !write(header.data(), header.size())) return fail();
  std::vector<uint8_t> quants;
  std::vector<uint16_t> scales;
  for (const OutputTensor& t : plan) {
    auto view = checkpoint.Find(t.source);
    if (!view.ok()) return view.status();
    bool ok = true;
    if (t.part == OutputTensor::kCopy) {
      ok = write(view->data, t.bytes);
    } else if (t.part == OutputTensor::kQuants) {
      QuantizeMatrix(*view, format, &quants, &scales);  // Kept for the _scale entry that follows.
      ok = write(quants.data(), quants.size());
    } else {
      ok = write(scales.data(), scales.size() * 2);
    }
    if (!ok) return fail();
    report->output_bytes += t.bytes;
  }
  if (std::fflush(file.get()) != 0) return fail();
  return absl::OkStatus();
}

// Copies the files of in_dir that are not the checkpoint's tensors.
absl::Status CopyOtherFiles(const std::string& in_dir, const std::string& out_dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(in_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == "model.safetensors" ||
        name == "model.safetensors.index.json" ||
        (absl::StartsWith(name, "model-") && absl::EndsWith(name, ".safetensors"))) {
      continue;
    }
    fs::copy_file(entry.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing,
                  error);
    if (error) {
      return absl::InternalError(absl::StrCat("cannot copy ", entry.path().string(), " to ",
                                              out_dir, ": ", error.message()));
    }
  }
  if (error)
    return absl::InternalError(absl::StrCat("cannot list ", in_dir, ": ", error.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuantizeReport> QuantizeModelDir(const std::string& in_dir,
                                                const std::string& out_dir, DType format) {
  if (!IsBlockQuantized(format)) {
    return absl::InvalidArgumentError(absl::StrCat("quantize: format ", DTypeName(format),
                                                   " is not a block format (q8_0 or q4_0)"));
  }
  std::error_code error;
  if (fs::exists(out_dir, error) && fs::equivalent(in_dir, out_dir, error)) {
    return absl::InvalidArgumentError("quantize: the output directory is the input directory");
  }
  auto config = LoadLlamaConfig(in_dir);
  if (!config.ok()) return config.status();
  auto checkpoint = Checkpoint::Open(in_dir);
  if (!checkpoint.ok()) return checkpoint.status();
  QuantizeReport report;
  auto plan = PlanOutput(*checkpoint, format, &report);
  if (!plan.ok()) return plan.status();
  fs::create_directories(out_dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", out_dir, ": ", error.message()));
  }
  if (absl::Status status = CopyOtherFiles(in_dir, out_dir); !status.ok()) return status;
  absl::Status status =
      WriteCheckpoint(*checkpoint, *plan, format, out_dir + "/model.safetensors", &report);
  if (!status.ok()) return status;
  return report;
}

}  // namespace tandem
