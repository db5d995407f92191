"""Rejected requests grouped by reason: one line per kind with a count and a few examples."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.units import counted

EXAMPLES = 3
"""Examples kept per reason."""
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, slots=True, kw_only=True)
class RejectGroup:
    """Requests rejected for the same kind of reason (the reason with its numbers as N)."""

    kind: str
    count: int
    examples: tuple[tuple[int, str], ...]
    """(request index, its own reason) for the first few requests of the kind."""

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.kind, "count": self.count,
                "examples": [{"index": i, "reason": why} for i, why in self.examples],
                "line": self.line()}

    def line(self) -> str:
        shown = "; ".join(f"request {i}: {why}" for i, why in self.examples)
        more = f"; and {self.count - len(self.examples)} more" if self.count > EXAMPLES else ""
        return f"{counted(self.count, 'request')} rejected: {self.kind} (e.g. {shown}{more})"


def group_rejections(rejected: Mapping[int, str]) -> list[RejectGroup]:
    """Group request index -> reason by the reason's wording, largest group first."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for index in sorted(rejected):
        why = rejected[index]
        groups.setdefault(_NUMBER.sub("N", why), []).append((index, why))
    out = [RejectGroup(kind=k, count=len(v), examples=tuple(v[:EXAMPLES]))
           for k, v in groups.items()]
    return sorted(out, key=lambda g: -g.count)
