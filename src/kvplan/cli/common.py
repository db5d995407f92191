"""Shared CLI helpers: JSON output, rich console, option types."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console

console = Console(highlight=False)


def print_json(obj: Any) -> None:
    """Print exactly one JSON object on stdout and nothing else."""
    print(json.dumps(obj, indent=2, sort_keys=False, default=_default))


def _default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__}")
