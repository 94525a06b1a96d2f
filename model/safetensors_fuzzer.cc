// libFuzzer entry point for the safetensors header parser. The input is a whole file.
// Besides "no crash, no leak, no undefined behaviour", it checks the parser's
// guarantees on every accepted header and aborts when one is broken.
//
// Build and run with clang's libFuzzer (outside the gcc build), for example:
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I.
//     model/safetensors_fuzzer.cc model/safetensors.cc -o /tmp/safetensors_fuzzer
//     -labsl_statusor -labsl_status -labsl_cord -labsl_cord_internal
//     -labsl_cordz_info -labsl_cordz_functions -labsl_cordz_handle -labsl_strerror
//     -labsl_strings -labsl_strings_internal -labsl_int128 -labsl_throw_delegate
//     -labsl_raw_logging_internal -labsl_base -labsl_spinlock_wait
//   (one command line) then
//   /tmp/safetensors_fuzzer model/testdata/safetensors_corpus -max_total_time=60
// The gcc test safetensors_fuzz_replay_test runs the same entry point over the seed
// corpus and deterministic mutations of it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "model/safetensors.h"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

void CheckHeader(const tandem::SafetensorsHeader& header, uint64_t file_size) {
  Require(header.data_offset >= 8 && header.data_offset <= file_size);
  const uint64_t buffer_size = file_size - header.data_offset;
  for (const auto& [name, info] : header.tensors) {
    Require(name != "__metadata__");
    Require(info.begin <= info.end && info.end <= buffer_size);
    const int element_size = tandem::SafetensorsDTypeSize(info.dtype);
    Require(element_size > 0);
    uint64_t numel = 1;
    for (int64_t dim : info.shape) {
      Require(dim >= 0);
      numel *= static_cast<uint64_t>(dim);  // Bounded by the byte range below.
    }
    Require(info.end - info.begin == numel * static_cast<uint64_t>(element_size) ||
            info.end == info.begin);
    Require(static_cast<uint64_t>(info.numel()) * element_size == info.end - info.begin);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = tandem::ParseSafetensorsHeader(bytes, size, "fuzz.safetensors");
  if (header.ok()) CheckHeader(*header, size);
  // A prefix of the file (as a streaming reader would pass) must never be read past.
  const size_t prefix_size = size / 2;
  auto partial =
      tandem::ParseSafetensorsHeader(bytes.substr(0, prefix_size), size, "fuzz.safetensors");
  if (partial.ok()) {
    Require(partial->data_offset <= prefix_size);
    CheckHeader(*partial, size);
  }
  return 0;
}
