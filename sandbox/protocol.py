"""Framing between the trusted host and a zygote, and the strict value codec for test probes.

A message is a small JSON header plus opaque byte blobs. Untrusted payloads (grader source, samples,
model code) travel as blobs so the zygote never parses them; the host caps every size it reads.
"""

from __future__ import annotations

import json
import math
import os
import struct

MAX_HEADER = 1 << 20
MAX_BLOB = 64 << 20


class ProtocolError(Exception):
    pass


def encode(header: dict, blobs: list[bytes] = ()) -> bytes:
    """Header length and blob count, every blob's length, the JSON header, the blobs: the reader needs
    three reads for a whole frame (and one copy)."""
    hb = json.dumps(header).encode()
    return b"".join([struct.pack(f"<II{len(blobs)}I", len(hb), len(blobs), *map(len, blobs)), hb, *blobs])


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("peer closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_msg(fd: int) -> tuple[dict, list[bytes]]:
    hlen, nblobs = struct.unpack("<II", read_exact(fd, 8))
    if hlen > MAX_HEADER or nblobs > 16:
        raise ProtocolError(f"frame too large: header {hlen} bytes, {nblobs} blobs")
    lens = struct.unpack(f"<{nblobs}I", read_exact(fd, 4 * nblobs)) if nblobs else ()
    if any(blen > MAX_BLOB for blen in lens):
        raise ProtocolError(f"blob of {max(lens)} bytes is over the {MAX_BLOB} limit")
    body = memoryview(read_exact(fd, hlen + sum(lens)))
    header = json.loads(bytes(body[:hlen]))
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    blobs, at = [], hlen
    for blen in lens:
        blobs.append(bytes(body[at:at + blen]))
        at += blen
    return header, blobs


# ---------------------------------------------------------------- strict plain-value codec
MAX_DEPTH, MAX_NODES, MAX_INT_DIGITS = 60, 200_000, 4000


class _Budget:
    nodes = 0


def to_tagged(value, depth: int = 0, budget: _Budget | None = None):
    """Plain builtin values only, by exact type (subclasses with odd __eq__ do not pass as their base)."""
    budget = budget or _Budget()
    budget.nodes += 1
    if depth > MAX_DEPTH or budget.nodes > MAX_NODES:
        return {"x": "too deep or too large"}
    t = type(value)
    if value is None:
        return None
    if t is bool:
        return {"b": value}
    if t is int:
        if value.bit_length() > MAX_INT_DIGITS * 3:
            return {"x": "int too large"}
        return {"i": str(value)}
    if t is float:
        return {"f": value.hex()}
    if t is str:
        return {"s": value}
    if t is complex:
        return {"c": [value.real.hex(), value.imag.hex()]}
    if t in (list, tuple, set, frozenset):
        tag = {list: "l", tuple: "t", set: "set", frozenset: "fset"}[t]
        return {tag: [to_tagged(v, depth + 1, budget) for v in value]}
    if t is dict:
        return {"d": [[to_tagged(k, depth + 1, budget), to_tagged(v, depth + 1, budget)] for k, v in value.items()]}
    name = getattr(t, "__name__", "?")
    return {"x": f"object of type {str(name)[:80]}"}


class NotPlain(Exception):
    pass


def from_tagged(obj, depth: int = 0):
    """Inverse of to_tagged on the trusted side; raises NotPlain for anything unexpected."""
    if depth > MAX_DEPTH + 1:
        raise NotPlain("nested too deeply")
    if obj is None:
        return None
    if not isinstance(obj, dict) or len(obj) != 1:
        raise NotPlain("malformed value")
    (tag, v), = obj.items()
    if tag == "b" and isinstance(v, bool):
        return v
    if tag == "i" and isinstance(v, str) and len(v) <= MAX_INT_DIGITS + 1:
        return int(v)
    if tag == "f" and isinstance(v, str):
        return float.fromhex(v)
    if tag == "s" and isinstance(v, str):
        return v
    if tag == "c" and isinstance(v, list) and len(v) == 2:
        return complex(float.fromhex(v[0]), float.fromhex(v[1]))
    if tag in ("l", "t", "set", "fset") and isinstance(v, list):
        items = [from_tagged(x, depth + 1) for x in v]
        return {"l": list, "t": tuple, "set": set, "fset": frozenset}[tag](items)
    if tag == "d" and isinstance(v, list):
        return {from_tagged(k, depth + 1): from_tagged(x, depth + 1) for k, x in v}
    if tag == "x":
        raise NotPlain(str(v)[:200])
    raise NotPlain(f"unknown tag {str(tag)[:20]!r}")


def short(value, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = "<unrepresentable>"
    return text if len(text) <= limit else text[:limit] + "..."


def finite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))
