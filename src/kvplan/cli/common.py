"""Shared CLI helpers: JSON output, rich console, option types."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console

PIPE_WIDTH = 120
"""Rich assumes 80 columns when stdout is not a terminal; tables read better a little wider."""

console = Console(
    highlight=False,
    width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH,
)
"""On a terminal, or with COLUMNS set, rich uses that width; otherwise PIPE_WIDTH."""


def print_json(obj: Any) -> None:
    """Print exactly one JSON object on stdout and nothing else."""
    print(json.dumps(obj, indent=2, sort_keys=False, default=_default))


def _default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__}")
