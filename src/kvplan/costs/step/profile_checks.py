"""Checks on profile files before a Profile is built: types, finiteness, sane ranges.

The Profile dataclass checks its own invariants; a file needs more: names must be strings,
numbers must be finite and within ``kvplan.limits.PROFILE_RANGES`` (an efficiency of 1e-300
would print a TTFT of 10^297 s).
"""

from __future__ import annotations

from collections.abc import Mapping
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
