// Evaluation of a parsed template (jinja/ast.h) with @huggingface/jinja's semantics.
// Internal to //jinja:template; use jinja/template.h.
#ifndef TANDEM_JINJA_INTERPRETER_H_
#define TANDEM_JINJA_INTERPRETER_H_

#include <string>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace tandem::jinja {

// The text `program` renders to with `variables` (looked up before nothing else: globals
// are part of `variables`). Throws JinjaError (TemplateRaised for raise_exception) on
// type errors, unknown filters or tests, and when the output would pass `max_output_bytes`.
std::string RenderProgram(const Program& program, ValueDict variables, size_t max_output_bytes);

}  // namespace tandem::jinja

#endif  // TANDEM_JINJA_INTERPRETER_H_
