"""WorkloadArgs' lax coercion agrees with pydantic's lax mode (the model it replaced)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, ValidationError

from kvplan.specs.requests.lax_fields import FieldError, as_float, as_int, as_path, as_str


class _Reference(BaseModel):
    i: int | None = None
    f: float | None = None
    s: str | None = None
    p: Path | None = None


SAMPLES: dict[str, list[Any]] = {
    "i": [True, False, 5, -3, 5.0, 5.5, float("inf"), float("nan"), "5", " 5 ", "+7", "5.0",
          "x", "", "5.5", np.int64(3), np.float64(4.0), b"12", [1], None],
    "f": [True, 3, -2, 2.5, "inf", "-inf", "1e3", " 2 ", "x", "", np.float64(2.5),
          np.int32(7), float("inf"), [1], {}, None],
    "s": ["x", "", b"ab", 5, 1.5, None],
    "p": ["a.csv", Path("b/c.csv"), 5, None],
}
COERCE = {"i": as_int, "f": as_float, "s": as_str, "p": as_path}


def _pydantic(field: str, value: Any) -> tuple[str, Any]:
    try:
        return "ok", getattr(_Reference(**{field: value}), field)
    except ValidationError as exc:
        return "error", exc.errors()[0]["msg"].lower()


def _ours(field: str, value: Any) -> tuple[str, Any]:
    try:
        return "ok", None if value is None else COERCE[field](value)
    except FieldError as exc:
        return "error", str(exc)


@pytest.mark.parametrize(("field", "value"),
                         [(f, v) for f, values in SAMPLES.items() for v in values])
def test_coercion_matches_pydantic_lax_mode(field: str, value: Any) -> None:
    want, got = _pydantic(field, value), _ours(field, value)
    assert got[0] == want[0], (value, got, want)
    if got[0] == "error":
        assert want[1].startswith(got[1])  # ours leaves out pydantic's "for <class ...>"
    elif isinstance(want[1], float) and math.isnan(want[1]):
        assert math.isnan(got[1])
    else:
        assert (type(got[1]), got[1]) == (type(want[1]), want[1])
