"""Byte and time units, integer ceiling division, and unit-aware size parsing/formatting."""

from __future__ import annotations

import math
import re

from kvplan.errors import InputError

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
KB = 1000
MB = 1000**2
GB = 1000**3
TB = 1000**4

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "K": KiB,
    "M": MiB,
    "G": GiB,
    "T": TiB,
    "k": KB,  # vLLM's human_readable_int: a lowercase letter is decimal (24g = 24e9)
    "m": MB,
    "g": GB,
    "t": TB,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*$")


def counted(n: int | None, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in its number: 1 replica, 3 replicas (0 and None take the plural)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def pct_text(x: float) -> str:
    """A margin or miss in % that keeps a miss under 1 % visible: p99 TTFT 10,031.6 ms
    against a 10,000 ms limit is -0.32 %, which read '-0 %' (as if it met it)."""
    return f"{x:.0f}" if abs(x) >= 1 or x == 0 else f"{x:.2g}"


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers (vLLM's ``cdiv``)."""
    return -(-a // b)


def parse_size(text: str, flag: str = "") -> int:
    """Parse '24GiB', '24 GB', '1.5G' (binary), '24g' (decimal, as vLLM reads it), or a plain
    byte count into integer bytes; ``flag`` (e.g. '--kv-cache-memory') leads the error."""
    match = _SIZE_RE.match(str(text))
    unit = match.group(2) if match else None
    if unit is not None and len(unit) > 1:
        unit = unit.lower()
    lead = f"{flag}: " if flag else ""
    if match is None or unit not in _SIZE_UNITS:
        raise InputError(f"{lead}cannot read size {text!r}: use bytes or a number with a unit "
                         "like 24GiB, 512MiB, 80GB")
    value = float(match.group(1)) * _SIZE_UNITS[unit]
    if not value < MAX_SIZE_BYTES:  # also inf (1e309) and nan
        raise InputError(f"{lead}size {text!r} is too large: sizes must be below 2^63 bytes")
    return int(value)


MAX_SIZE_BYTES = 2.0**63
"""Sizes past int64 are typos; the engine's own bounds are tighter (kvplan.limits)."""


def fmt_bytes(n: int | float, digits: int = 2) -> str:
    """Format bytes with binary units as vLLM prints them (e.g. '320.00 KiB', '3.81 GiB')."""
    value = float(n)
    for unit, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(value) >= size:
            return f"{value / size:.{digits}f} {unit}"
    return f"{int(value)} B"


def fmt_seconds(s: float) -> str:
    """Format a duration in the most readable unit (us, ms, s, min or h)."""
    if not math.isfinite(s):
        return f"{s} s"
    if s < 0:  # a saving (the dual-batch overlap's row of --explain)
        return f"-{fmt_seconds(-s)}"
    figures = ((s * 1e6, ".1f", "us", 1000.0), (s * 1e3, ".2f", "ms", 1000.0),
               (s, ".3f", "s", 60.0), (s / 60, ".2f", "min", 60.0))
    for value, spec, unit, top in figures:  # a unit while its rounded figure stays below
        text = format(value, spec)         # the next unit's 1: 0.999996 s is "1.000 s",
        if float(text) < top:              # not "1000.00 ms"
            return f"{text} {unit}"
    return f"{s / 3600:,.2f} h"


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kmgtKMGT]?)")


def human_readable_int(text: str) -> int:
    """vLLM's ``human_readable_int`` (0.11): ``8k`` = 8,000, ``8K`` = 8,192, ``25.6k`` = 25,600,
    ``1m`` = 1,000,000, ``1M`` = 2**20; decimals only with the lowercase (decimal) suffixes."""
    value = text.strip()
    match = _HUMAN_INT.fullmatch(value)
    if match is None or len(value) > 30:
        return _plain_int(text, value)
    number, suffix = match.groups()
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    if "." in number:
        raise ValueError(f"decimals need a decimal suffix (k, m, g, t), got {text!r}")
    return int(number) * _BINARY.get(suffix, 1)


def _plain_int(text: str, value: str) -> int:
    """vLLM's fallback, Python's ``int(value)``: ``+8192`` and ``8_192`` are 8,192 (a
    negative count is refused here, as no flag read with it takes one)."""
    try:
        if len(value) <= 30 and not value.startswith("-"):
            return int(value)
    except ValueError:
        pass
    raise ValueError(f"not a whole number: {text!r} (e.g. 8192, 8k, 32K)")
