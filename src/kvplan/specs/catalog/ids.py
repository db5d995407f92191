"""How a typed model id is read against a table of ids: case-insensitive, 'org/name' or
'org--name', and the org may be left out when the name alone is unique."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def lookup(name: str, table: Mapping[str, T]) -> T | None:
    """``table`` (lower-case 'org/name' keys) at ``name``; None when absent or ambiguous."""
    key = name.strip().lower().replace("--", "/", 1)
    if key in table:
        return table[key]
    matches = [v for k, v in table.items() if k.split("/", 1)[-1] == key]
    return matches[0] if len(matches) == 1 else None
