// A parsed Jinja template (the subset chat templates use; see jinja/parser.h,
// jinja/filters.h and jinja/methods.h for what it covers), rendered with the semantics of
// @huggingface/jinja, the reference its output is tested against byte for byte.
#ifndef TANDEM_JINJA_TEMPLATE_H_
#define TANDEM_JINJA_TEMPLATE_H_

#include <ctime>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jinja/ast.h"
#include "jinja/methods.h"
#include "jinja/value.h"

namespace tandem::jinja {

struct RenderOptions {
  // The time strftime_now formats (tests fix it).
  Clock clock = [] { return std::time(nullptr); };
  // Rendering stops with an error past this much output.
  size_t max_output_bytes = size_t{16} << 20;
};

class Template {
 public:
  // INVALID_ARGUMENT "template syntax error: <what>" when `source` does not parse,
  // including constructs outside the subset (e.g. "unsupported statement '{% macro %}'").
  static absl::StatusOr<Template> Parse(absl::string_view source);

  // The text for `variables` (over the globals of jinja/methods.h). INVALID_ARGUMENT with
  // exactly the template's message when it calls raise_exception(message); with
  // "template render error: <what>" for other failures (unknown filter, type error).
  absl::StatusOr<std::string> Render(const ValueDict& variables,
                                     const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

  std::shared_ptr<const Program> program_;  // shared by copies; never modified
};

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_TEMPLATE_H_
