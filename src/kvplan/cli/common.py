"""Shared CLI helpers: JSON output, rich console, option types."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rich.console import Console

    from kvplan.report.outputs import OutputTarget

PIPE_WIDTH = 120
"""Rich assumes 80 columns when stdout is not a terminal; tables read better a little wider."""



class _LazyConsole:
    """Stands in for rich's Console and builds it on first use, so runs that print only JSON
    never import rich. On a terminal, or with COLUMNS set, rich uses that width; otherwise
    PIPE_WIDTH."""

    def __init__(self) -> None:
        self._real: Console | None = None

    def real(self) -> Console:
        if self._real is None:
            from rich.console import Console

            self._real = Console(
                highlight=False,
                width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPE_WIDTH,
            )
        return self._real

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


_CONSOLE = _LazyConsole()
console = cast("Console", _CONSOLE)
"""The CLI's rich console (``console.print``); made when first used."""


def rich_console() -> Console:
    """The real Console, for rich objects that want one (``Progress(console=...)``)."""
    return _CONSOLE.real()


def print_json(obj: Any) -> None:
    """Print exactly one strict JSON object on stdout (no NaN/Infinity) and nothing else."""
    from kvplan.report.json_out import dumps

    print(dumps(obj))


def check_output(path: str | Path | None, flag: str,
                 inputs: Iterable[str | Path | None] = ()) -> OutputTarget | None:
    """Check an output path before the work (None passes through); see report/outputs.py."""
    if path is None:
        return None
    from kvplan.report.outputs import check_output as check
    from kvplan.report.outputs import input_files

    return check(path, flag, input_files(*inputs))


def write_output(out: OutputTarget, data: bytes | str | Iterable[str], *, as_json: bool) -> None:
    """Write atomically and say ``wrote FILE`` (on stderr under --json, so stdout stays JSON)."""
    from kvplan.report.outputs import write_output as write

    notice = write(out, data)
    print(notice, file=sys.stderr if as_json else sys.stdout)


def check_plot(path: str | Path | None, inputs: Iterable[str | Path | None] = ()
               ) -> OutputTarget | None:
    """A --plot path checked before the work: .png/.svg/.html, writable, not an input."""
    if path is None:
        return None
    from kvplan.report.charts import check_chart_path

    check_chart_path(path)
    return check_output(path, "--plot", inputs)


def write_chart(out: OutputTarget, chart: Any, *, as_json: bool) -> None:
    """Render an altair chart by the file's extension and write it (``wrote FILE``)."""
    from kvplan.report.charts import chart_bytes

    write_output(out, chart_bytes(chart, out.path.suffix), as_json=as_json)
