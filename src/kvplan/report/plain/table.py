"""A rich ``Table`` (default heavy-head box) drawn as plain text, for output that is not a
terminal: the same bytes as rich's, or None where rich would wrap, style or reinterpret it."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

PIPE_WIDTH = 120
"""The console width rich gets when stdout is not a terminal and COLUMNS is unset
(cli.common.PIPE_WIDTH)."""
_RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS",
             "JPY_PARENT_PID", "DATABRICKS_RUNTIME_VERSION")
"""Variables that make rich style its output (or size it) even on a pipe: rich prints then."""
_MARKUP = re.compile(r"\[|:[\w+-]+:")
"""Rich reads ``[...]`` as markup and ``:name:`` as an emoji code: such text goes to rich."""
_NARROW = frozenset("—–·×…µ±≤≥→←")
"""Non-ASCII characters one cell wide (anything else wide or combining goes to rich)."""


@dataclass(frozen=True, slots=True)
class PlainTable:
    """Title, headers, per-column justification (``left``/``right``) and rows of strings."""

    title: str
    headers: tuple[str, ...]
    justify: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def plain_width() -> int | None:
    """The width rich would use on this stdout, or None when rich must print (a terminal,
    a colour-forcing variable, a COLUMNS that is not a number)."""
    if any(os.environ.get(name) for name in _RICH_ENV):
        return None
    isatty = getattr(sys.stdout, "isatty", None)
    if isatty is None or isatty():
        return None
    columns = os.environ.get("COLUMNS")
    if columns is None:
        return PIPE_WIDTH
    return int(columns) if columns.isascii() and columns.isdigit() and int(columns) > 0 else None


def plain_text(text: str) -> bool:
    """True when rich prints ``text`` unchanged: no markup or emoji codes, one cell a
    character."""
    return _MARKUP.search(text) is None and all(
        " " <= c <= "~" or c in _NARROW for c in text)


def plain_line(text: str, width: int) -> str | None:
    """``text`` and a newline as rich prints it at ``width``, or None where rich would not
    print it verbatim (wrapping, markup, wide characters)."""
    if len(text) > width or text != text.rstrip() or not plain_text(text):
        return None
    return text + "\n"


def _cell(text: str, width: int, justify: str) -> str:
    return f" {text.rjust(width) if justify == 'right' else text.ljust(width)} "


def _title(title: str, width: int) -> str:
    left = (width - len(title)) // 2
    return " " * left + title + " " * (width - len(title) - left) + "\n"


def render_table(t: PlainTable, width: int) -> str | None:
    """The table as rich draws it at console ``width``, or None when rich must (it would
    shrink or wrap a column, or a cell is not plain text)."""
    texts = [t.title, *t.headers, *(c for row in t.rows for c in row)]
    if not all(plain_text(x) for x in texts) or any("\n" in x for x in texts):
        return None
    widths = [max(len(r[i]) for r in (t.headers, *t.rows)) for i in range(len(t.headers))]
    total = sum(widths) + 3 * len(widths) + 1
    if total > width or (t.title and len(t.title) > total):
        return None
    bar = [("━" * (w + 2)) for w in widths]
    thin = [("─" * (w + 2)) for w in widths]
    out = [_title(t.title, total)] if t.title else []
    out.append("┏" + "┳".join(bar) + "┓\n")
    out.append("┃" + "┃".join(_cell(h, w, j) for h, w, j in zip(
        t.headers, widths, t.justify, strict=True)) + "┃\n")
    out.append("┡" + "╇".join(bar) + "┩\n")
    for row in t.rows:
        out.append("│" + "│".join(_cell(c, w, j) for c, w, j in zip(
            row, widths, t.justify, strict=True)) + "│\n")
    out.append("└" + "┴".join(thin) + "┘\n")
    return "".join(out)
