#include "jinja/template.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "jinja/interpreter.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace tandem::jinja {

absl::StatusOr<Template> Template::Parse(absl::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<Program> program = jinja::Parse(*tokens);
  if (!program.ok()) return program.status();
  return Template(std::make_shared<const Program>(*std::move(program)));
}

absl::StatusOr<std::string> Template::Render(const ValueDict& variables,
                                             const RenderOptions& options) const {
  ValueDict scope = MakeGlobals(options.clock);
  for (const auto& [name, value] : variables.entries()) scope.Set(name, value);
  try {
    return RenderProgram(*program_, std::move(scope), options.max_output_bytes);
  } catch (const TemplateRaised& raised) {
    return absl::InvalidArgumentError(raised.what());
  } catch (const JinjaError& error) {
    return absl::InvalidArgumentError(absl::StrCat("template render error: ", error.what()));
  }
}

}  // namespace tandem::jinja
