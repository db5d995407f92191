"""Strict JSON for every --json print and saved result: no NaN or Infinity, ever.

``json.dumps`` writes ``NaN``/``Infinity`` by default, which JavaScript, Go and serde reject.
Here an infinite float becomes the string ``"inf"`` (``"-inf"``), as ``vllm bench serve``
writes ``request_rate``, and NaN becomes ``null`` (unknown); then ``allow_nan=False``
guarantees nothing non-standard slips through.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any


def dumps(obj: Any, *, indent: int | None = 2) -> str:
    """One strict JSON document for ``obj`` (numpy values converted)."""
    return json.dumps(_clean(obj), indent=indent, allow_nan=False, default=_default)


def dumps_chunks(obj: dict[str, Any], *, piece_chars: int = 1 << 20) -> Iterator[str]:
    """``dumps(obj) + "\n"`` in pieces of about ``piece_chars``, byte for byte: a value with
    ``row_chunks`` (lists of float arrays, as --save-detailed's itls) is written a chunk at a
    time and never held whole as Python floats or text (1e8 tokens: ~2.5 GB of text)."""
    held: list[str] = []
    size = 0
    for text in _pieces(obj):
        held.append(text)
        size += len(text)
        if size >= piece_chars:
            yield "".join(held)
            held, size = [], 0
    yield "".join(held)


def _pieces(obj: dict[str, Any]) -> Iterator[str]:
    if not obj:
        yield "{}\n"
        return
    sep = "{\n"
    for key, value in obj.items():
        yield f"{sep}  {json.dumps(str(key))}: "
        if hasattr(value, "row_chunks"):
            yield from _float_rows(value.row_chunks())
        else:
            yield dumps(value).replace("\n", "\n  ")
        sep = ",\n"
    yield "\n}\n"


def _float_rows(chunks: Iterator[Sequence[Any]]) -> Iterator[str]:
    """A list of float lists (or arrays) as a top-level key's value, as dumps writes it."""
    sep = "[\n    "
    for chunk in chunks:
        for row in chunk:
            yield sep
            yield from _float_row(row)
            sep = ",\n    "
    yield "[]" if sep.startswith("[") else "\n  ]"


def _float_row(row: Any, piece: int = 1 << 16) -> Iterator[str]:
    if len(row) == 0:
        yield "[]"
        return
    sep = "[\n      "
    for a in range(0, len(row), piece):
        values = [float(x) for x in row[a:a + piece]] if isinstance(row, list) else (
            row[a:a + piece].tolist())
        text = ",\n      ".join(map(float.__repr__, values))
        if "n" in text:  # nan or inf: as _clean writes them
            text = ",\n      ".join(json.dumps(_clean(v)) for v in values)
        yield sep + text
        sep = ",\n      "
    yield "\n    ]"


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return _clean(obj.tolist())
    return obj


def _float(x: float) -> float | str | None:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return _clean(obj.item())
    raise TypeError(f"cannot serialise {type(obj).__name__}")
