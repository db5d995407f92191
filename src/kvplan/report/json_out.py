"""Strict JSON for every --json print and saved result: no NaN or Infinity, ever.

``json.dumps`` writes ``NaN``/``Infinity`` by default, which JavaScript, Go and serde reject.
Here an infinite float becomes the string ``"inf"`` (``"-inf"``), as ``vllm bench serve``
writes ``request_rate``, and NaN becomes ``null`` (unknown); then ``allow_nan=False``
guarantees nothing non-standard slips through.
"""

from __future__ import annotations

import json
import math
from typing import Any


def dumps(obj: Any, *, indent: int | None = 2) -> str:
    """One strict JSON document for ``obj`` (numpy values converted)."""
    return json.dumps(_clean(obj), indent=indent, allow_nan=False, default=_default)


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
