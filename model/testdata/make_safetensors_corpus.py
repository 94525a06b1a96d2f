#!/usr/bin/python3
"""Writes the seed corpus of the safetensors header fuzzer.

    /usr/bin/python3 model/testdata/make_safetensors_corpus.py

Files named valid_* are well-formed safetensors files; invalid_* each break one rule
of the format. Deterministic; needs only the Python standard library.
"""

import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "safetensors_corpus")

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I8": 1, "U8": 1}


def assemble(header_text, data=b""):
    header = header_text.encode("utf-8")
    return struct.pack("<Q", len(header)) + header + data


def tensors_file(tensors, metadata=None):
    """tensors: list of (name, dtype, shape); data bytes are a counting pattern."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        size = SIZES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    return assemble(text, bytes(i % 251 for i in range(offset)))


def main():
    os.makedirs(OUT, exist_ok=True)
    llama = []
    for layer in range(2):
        prefix = "model.layers.%d." % layer
        llama += [(prefix + "self_attn.q_proj.weight", "F16", [8, 8]),
                  (prefix + "self_attn.k_proj.weight", "F16", [4, 8]),
                  (prefix + "input_layernorm.weight", "F16", [8])]
    files = {
        "valid_f32_matrix": tensors_file([("w", "F32", [2, 3])]),
        "valid_mixed_dtypes": tensors_file(
            [("a", "F16", [3]), ("b", "BF16", [2, 2]), ("c", "I64", []), ("d", "U8", [5]),
             ("e", "I8", [1, 1, 2]), ("f", "F64", [2]), ("g", "I32", [3])],
            metadata={"format": "pt", "note": "mixed"}),
        "valid_empty_header": assemble("{}      "),
        "valid_zero_size_tensor": tensors_file([("empty", "F32", [0, 4]), ("bytes", "U8", [3])]),
        "valid_metadata_only": assemble('{"__metadata__":{"format":"pt"}}'),
        "valid_llama_like": tensors_file(llama, metadata={"format": "pt"}),
        "invalid_short": b"\x10\x00\x00\x00\x00",
        "invalid_header_beyond_file": struct.pack("<Q", 4096) + b'{"w":{}}',
        "invalid_bad_json": assemble('{"w": {"dtype": "F32", "shape": [1], '),
        "invalid_overlap": assemble(
            '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
            '"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}', b"x" * 6),
        "invalid_size_mismatch": assemble(
            '{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,12]}}', b"x" * 12),
        "invalid_unknown_dtype": assemble(
            '{"w":{"dtype":"F8_E4M3X","shape":[2],"data_offsets":[0,2]}}', b"x" * 2),
        "invalid_negative_dim": assemble(
            '{"w":{"dtype":"U8","shape":[-2],"data_offsets":[0,2]}}', b"x" * 2),
        "invalid_offsets_out_of_range": assemble(
            '{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', b"x" * 10),
        "invalid_metadata_not_string": assemble(
            '{"__metadata__":{"format":["pt"]}}'),
    }
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), OUT))


if __name__ == "__main__":
    main()
