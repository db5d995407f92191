"""Checks on profile files before a Profile is built: types, finiteness, sane ranges.

The Profile dataclass checks its own invariants; a file needs more: names must be strings,
numbers must be finite and within ``kvplan.limits.PROFILE_RANGES`` (an efficiency of 1e-300
would print a TTFT of 10^297 s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kvplan.errors import ConfigError, KvplanError
from kvplan.limits import PROFILE_RANGES, check_number


def check_profile_entry(entry: Mapping[str, Any], where: str, file: str) -> None:
    """ConfigError naming the file, the entry and the field's range when a value is off."""
    for key in ("gpu", "precision"):
        if key in entry and not isinstance(entry[key], str):
            raise ConfigError(f"{where}: {key} must be a string, got {entry[key]!r:.40}",
                              file=file)
    for key, (low, high) in PROFILE_RANGES.items():
        if key in entry:
            try:
                check_number(key, entry[key], low, high)
            except KvplanError as exc:
                raise ConfigError(f"{where}: {exc}", file=file) from None


def profile_entries(data: Mapping[str, Any], file: str) -> list[Any]:
    """The file's ``profiles`` list (absent = none); anything else is refused."""
    entries = data.get("profiles")
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError("'profiles' must be a list of profile objects", file=file)
    return entries


PRECISIONS = ("float16", "bfloat16", "fp8", "fp4")
"""The compute precisions a profile is picked by (costs.memory.resolved.precision_of)."""
_PRECISION_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def canonical_entry(entry: Mapping[str, Any], where: str, file: str) -> dict[str, Any]:
    """ENTRY with its GPU as the catalog spells it (an alias such as H100 ->
    H100-SXM-80GB; an id outside the catalog, a GPU described in a file, as written) and
    its precision one of PRECISIONS ('bf16' -> 'bfloat16'): a profile is picked by exact
    id and precision, so another spelling was silently never used."""
    from kvplan.specs.hardware import catalog_id

    out = dict(entry)
    gpu = out.get("gpu", "*")
    if gpu != "*":
        out["gpu"] = catalog_id(gpu) or gpu
    precision = out.get("precision", "*")
    if precision != "*":
        precision = _PRECISION_ALIASES.get(precision.strip().lower(), precision.strip().lower())
        if precision not in PRECISIONS:
            raise ConfigError(f"{where}: precision must be one of {', '.join(PRECISIONS)} "
                              f"(or '*'), got {out['precision']!r:.40}", file=file)
        out["precision"] = precision
    return out


def check_unique(entries: Sequence[Any], file: str) -> None:
    """One profile per (GPU, precision): with two, the first was used and the second
    silently ignored."""
    seen: dict[tuple[str, str], int] = {}
    for i, p in enumerate(entries):
        key = (p.gpu.lower(), p.precision)
        if key in seen:
            raise ConfigError(f"profiles[{i}] repeats profiles[{seen[key]}] ({p.gpu}, "
                              f"{p.precision}); keep one of them", file=file)
        seen[key] = i
