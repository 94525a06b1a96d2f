"""Minimal safetensors reader/writer on numpy (no safetensors package needed).

File layout: u64 little-endian header length N, N bytes of JSON header
({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
"__metadata__": {str: str}}), then the raw little-endian tensor bytes;
offsets are relative to the end of the header.
"""

import json
import struct

import numpy as np

_NP_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # raw bits; see bf16_bits_to_f32
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
}


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """Round-to-nearest-even f32 -> bf16 bit pattern (finite inputs)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n


def read_metadata(path):
    header, _ = read_header(path)
    return header.get("__metadata__", {}) or {}


def read(path, names=None, as_float32=False):
    """Returns {name: (dtype_str, np.ndarray)}.

    BF16 tensors come back as uint16 bit patterns unless as_float32, in which
    case every floating tensor (F16, BF16, F32, F64) is widened to float32
    except F64, which stays float64.
    """
    header, base = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if names is not None and name not in names:
                continue
            dt = info["dtype"]
            if dt not in _NP_DTYPES:
                raise ValueError("%s: unsupported dtype %s for %s" % (path, dt, name))
            b, e = info["data_offsets"]
            f.seek(base + b)
            raw = f.read(e - b)
            shape = tuple(info["shape"])
            arr = np.frombuffer(raw, dtype=_NP_DTYPES[dt]).reshape(shape).copy()
            if as_float32:
                if dt == "BF16":
                    arr = bf16_bits_to_f32(arr).reshape(shape)
                elif dt in ("F16", "F32"):
                    arr = arr.astype(np.float32)
            out[name] = (dt, arr)
    return out


def write(path, tensors, metadata=None):
    """tensors: {name: (dtype_str, array)}; array is converted to dtype_str.

    For "BF16" pass either float values (rounded to nearest even) or uint16
    bit patterns.
    """
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        dt, arr = tensors[name]
        arr = np.asarray(arr)
        if dt == "BF16":
            data = arr if arr.dtype == np.uint16 else f32_to_bf16_bits(arr)
        else:
            data = arr.astype(_NP_DTYPES[dt])
        data = np.ascontiguousarray(data)
        raw = data.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hb = json.dumps(header, separators=(",", ":"), sort_keys=False).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for raw in blobs:
            f.write(raw)
