// libFuzzer target: arbitrary bytes as a chat template (the Jinja-subset engine of
// //jinja behind tandem::ChatTemplate).
//  * FromString is OK or INVALID_ARGUMENT, never another code or a crash.
//  * Rendering a fixed conversation, with and without the generation prompt, is OK or
//    INVALID_ARGUMENT, and its text stays within the engine's output bound; hostile
//    templates (deep nesting, huge loops, string doubling, namespace cycles) end in a
//    clear error, not in a crash, a hang, a leak or exhausted memory.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "model/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto chat = tandem::ChatTemplate::FromString(text, "<s>", "</s>");
  if (!chat.ok()) {
    FUZZ_CHECK(chat.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  chat->set_clock([] { return std::time_t{0}; });
  const std::vector<tandem::ChatMessage> messages = {
      {"system", "Be brief."},
      {"user", "Hi {{ not a tag }}"},
      {"assistant", "<think>\nhm\n</think>\n\n ok "},
      {"user", "\xC3\xA9\xF0\x9F\x98\x80"},
  };
  for (bool add_generation_prompt : {false, true}) {
    auto rendered = chat->Render(messages, add_generation_prompt);
    if (rendered.ok()) {
      FUZZ_CHECK(rendered->size() <= tandem::jinja::RenderOptions().max_output_bytes);
    } else {
      FUZZ_CHECK(rendered.status().code() == absl::StatusCode::kInvalidArgument);
    }
  }
  return 0;
}
