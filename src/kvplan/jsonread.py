"""Reading JSON people give us: every way it can go wrong becomes a ``JSONDecodeError``.

``json.loads`` can also raise RecursionError (``[[[[...`` nested 100,000 deep) and ValueError
(an integer of more than 4,300 digits); callers that catch ``JSONDecodeError`` for a clean
one-line message would let those escape as tracebacks. Integers longer than
``MAX_INT_DIGITS`` are refused here: no real field needs them. NaN/Infinity literals are read
(transformers writes and accepts them); the field checks then refuse them by name.
"""

from __future__ import annotations

import json
from typing import Any

MAX_INT_DIGITS = 100
"""Longest integer literal accepted (2^64 has 20 digits; field checks give the real range)."""


def loads(text: str) -> Any:
    """``json.loads`` that raises only ``json.JSONDecodeError`` on bad input."""
    try:
        return json.loads(text, parse_int=_int)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
    except ValueError as exc:
        raise json.JSONDecodeError(str(exc), text, 0) from None


def _int(literal: str) -> int:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(literal.lstrip('-'))} digits (at most "
                         f"{MAX_INT_DIGITS} are accepted)")
    return int(literal)


def depth(obj: Any) -> int:
    """How deeply lists and objects nest in ``obj`` (0 for a scalar), counted without
    recursion, so code that walks a document recursively can refuse a deep one first."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else ()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest
