// Reference encodings for //model:tokenizer_json_test: runs @lenml/tokenizers (a
// JavaScript port of Hugging Face's tokenizers, written by others) on a model
// directory's tokenizer.json and tokenizer_config.json.
//
//   node tokenizer_json_reference.js NODE_MODULES MODEL_DIR < {"texts": [...], "id_sequences": [...]}
//
// prints {"encoded": [ids per text, special-token strings parsed, no BOS added],
//         "decoded": [text per id sequence, special tokens skipped]}.
// clean_up_tokenization_spaces is turned off: Tandem streams text exactly as the
// tokens spell it.
'use strict';
const fs = require('fs');
const path = require('path');

const [nodeModules, modelDir] = process.argv.slice(2);
const {TokenizerLoader} = require(path.join(nodeModules, '@lenml/tokenizers'));
const readJson = (name) => JSON.parse(fs.readFileSync(path.join(modelDir, name), 'utf8'));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson('tokenizer.json'),
  tokenizerConfig: {...readJson('tokenizer_config.json'), clean_up_tokenization_spaces: false},
});
const input = JSON.parse(fs.readFileSync(0, 'utf8'));
const output = {
  encoded: input.texts.map((text) => Array.from(tokenizer.encode(text, {add_special_tokens: false}))),
  // The reference refuses to decode an empty sequence; its text is "".
  decoded: input.id_sequences.map(
      (ids) => ids.length === 0 ? '' : tokenizer.decode(ids, {
        skip_special_tokens: true,
        clean_up_tokenization_spaces: false,
      })),
};
process.stdout.write(JSON.stringify(output));
