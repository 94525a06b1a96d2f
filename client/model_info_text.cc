#include "client/model_info_text.h"

#include <google/protobuf/util/json_util.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/request_options.h"

namespace tandem::client {
namespace {

std::string Describe(const v1::ModelDescription& model) {
  std::vector<std::string> parts;
  if (!model.architecture().empty()) parts.push_back(model.architecture());
  parts.push_back(absl::StrCat("vocab ", model.vocab_size()));
  parts.push_back(absl::StrCat("tp ", model.tensor_parallel_size()));
  if (!model.backend().empty()) parts.push_back(model.backend());
  if (model.synthetic()) parts.push_back("SYNTHETIC weights");
  return absl::StrCat(model.name(), " (", absl::StrJoin(parts, ", "), ")");
}

}  // namespace

std::string ModelInfoText(const v1::ModelInfo& info) {
  std::vector<std::string> methods;
  for (int m : info.methods()) methods.push_back(MethodName(static_cast<v1::SpeculationMethod>(m)));
  const v1::SamplingParams& d = info.default_sampling();
  std::string out;
  absl::StrAppend(&out, "target     ", Describe(info.target()), "\n");
  absl::StrAppend(&out, "draft      ",
                  info.has_draft() ? absl::StrCat(Describe(info.draft()),
                                                  info.draft_available() ? "" : ", unavailable")
                                   : "none",
                  "\n");
  absl::StrAppend(&out, "limits     context ", info.context_length(), " tokens, max_new_tokens ",
                  info.max_new_tokens_limit(), ", K ", info.max_speculative_tokens(),
                  ", tree nodes ", info.max_tree_nodes(), ", queue ", info.max_queue(), "\n");
  absl::StrAppend(&out, "methods    ", absl::StrJoin(methods, ", "), "\n");
  absl::StrAppend(&out, "tokens     bos ", info.bos_token_id(), ", eos ", info.eos_token_id(),
                  ", stop ids [", absl::StrJoin(info.stop_token_ids(), ", "), "]\n");
  absl::StrAppend(&out, "sampling   unset fields: temperature ", d.temperature(),
                  d.temperature() == 0 ? " (greedy)" : "", ", top_p ",
                  d.has_top_p() ? d.top_p() : 1.0f, ", top_k ", d.top_k(), "\n");
  return out;
}

std::string ModelInfoJson(const v1::ModelInfo& info) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(info, &text, options).ok()) return "{}";
  return text;
}

}  // namespace tandem::client
