"""Lax coercion of user-given field values (ints, floats, strings, paths), as pydantic's lax
mode accepts them, with its wording for what it refuses: what WorkloadArgs needs, without
importing pydantic (about 70 ms of every CLI run)."""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

_WHOLE = re.compile(r"\s*[+-]?\d+(\.0*)?\s*")


class FieldError(ValueError):
    """A value of the wrong kind; the message is pydantic's, lower-cased."""


def as_int(value: Any) -> int:
    """int, bool, an integral float, or a string of a whole number ('5', ' 5 ', '5.0')."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FieldError("input should be a finite number")
        if value != int(value):
            raise FieldError("input should be a valid integer, got a number with a fractional part")
        return int(value)
    if isinstance(value, str | bytes):
        text = value.decode() if isinstance(value, bytes) else value
        if _WHOLE.fullmatch(text):
            return int(float(text)) if "." in text else int(text)
        raise FieldError("input should be a valid integer, unable to parse string as an integer")
    raise FieldError("input should be a valid integer")


def as_float(value: Any) -> float:
    """A real number (ints and bools too) or a string of one ('2', '1e3', 'inf')."""
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str | bytes):
        try:
            return float(value)
        except ValueError:
            raise FieldError("input should be a valid number, unable to parse string as a "
                             "number") from None
    raise FieldError("input should be a valid number")


def as_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode()
    raise FieldError("input should be a valid string")


def as_path(value: Any) -> Path:
    if isinstance(value, str | os.PathLike):
        return Path(value)
    raise FieldError("input is not a valid path")


def optional(coerce: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The same coercion, letting None through."""
    return lambda value: None if value is None else coerce(value)
