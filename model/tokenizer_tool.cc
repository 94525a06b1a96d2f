// Runs the tokenizer over JSON inputs and prints JSON results, for comparison with
// another implementation (SentencePiece itself, or a Hugging Face tokenizers port).
//
//   tokenizer_tool MODEL < {"texts": [...], "id_sequences": [[...], ...]}
//
// prints {"vocab_size", "bos_id", "eos_id", "pieces": [piece per id],
//         "control": [bool per id], "byte_values": [per id],
//         "encoded": [ids per text], "round_trip": [Decode(Encode(text))],
//         "decoded": [Decode(ids)], "streamed": [IncrementalDetokenizer text]}.
// Exits 1 (with the reason on stderr) on any error.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/tokenizer.h"

namespace {

using nlohmann::json;

int Fail(const std::string& message) {
  std::fprintf(stderr, "tokenizer_tool: %s\n", message.c_str());
  return 1;
}

int Run(const std::string& model_path, const json& input, json* output) {
  auto tokenizer = tandem::Tokenizer::Load(model_path);
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  json& out = *output;
  out["vocab_size"] = tokenizer->vocab_size();
  out["bos_id"] = tokenizer->bos_id();
  out["eos_id"] = tokenizer->eos_id();
  for (int id = 0; id < tokenizer->vocab_size(); ++id) {
    out["pieces"].push_back(tokenizer->IdToPiece(id));
    out["control"].push_back(tokenizer->IsControl(id));
    out["byte_values"].push_back(tokenizer->ByteValue(id));
  }
  out["encoded"] = json::array();
  out["round_trip"] = json::array();
  for (const auto& text : input.at("texts")) {
    auto ids = tokenizer->Encode(text.get<std::string>(), /*add_bos=*/false);
    if (!ids.ok()) return Fail(ids.status().ToString());
    auto decoded = tokenizer->Decode(*ids);
    if (!decoded.ok()) return Fail(decoded.status().ToString());
    out["encoded"].push_back(*ids);
    out["round_trip"].push_back(*decoded);
  }
  out["decoded"] = json::array();
  out["streamed"] = json::array();
  for (const auto& sequence : input.at("id_sequences")) {
    const std::vector<int> ids = sequence.get<std::vector<int>>();
    auto decoded = tokenizer->Decode(ids);
    if (!decoded.ok()) return Fail(decoded.status().ToString());
    out["decoded"].push_back(*decoded);
    tandem::IncrementalDetokenizer detokenizer(&*tokenizer);
    std::string streamed;
    for (const int id : ids) {
      auto delta = detokenizer.Add(id);
      if (!delta.ok()) return Fail(delta.status().ToString());
      streamed += *delta;
    }
    out["streamed"].push_back(streamed + detokenizer.Flush());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return Fail("usage: tokenizer_tool MODEL < input.json");
  try {
    const std::string request((std::istreambuf_iterator<char>(std::cin)),
                              std::istreambuf_iterator<char>());
    const json input = json::parse(request);
    json output;
    const int status = Run(argv[1], input, &output);
    if (status != 0) return status;
    // Strict UTF-8: text that is not valid UTF-8 is an error, not replaced.
    std::cout << output.dump() << "\n";
  } catch (const json::exception& error) {
    return Fail(error.what());
  }
  return 0;
}
