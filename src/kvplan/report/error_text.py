"""An error message as the one line the CLI prints: long echoed values cut, the line bounded."""

from __future__ import annotations

import re

MAX_LINE = 500
"""The longest ``error: ...`` line, in characters: kvplan's own longest messages (a KV cache
that does not fit, an infeasible plan with its lever) run to about 350 once values are cut."""
MAX_VALUE = 80
"""The most characters of one echoed value (a run without spaces, or a quoted string)."""
_LONG = MAX_VALUE + 20  # a path of up to 100 characters is shown whole
# a quoted value opens and closes outside a word: the apostrophes of "gate's and up's" do not
_QUOTED = re.compile(rf"(?<!\w)'[^']{{{_LONG},}}'(?!\w)|(?<!\w)\"[^\"]{{{_LONG},}}\"(?!\w)")
_RUN = re.compile(rf"\S{{{_LONG + 1},}}")
_MARK = "..."


def cut(text: str, keep: int) -> str:
    """``text`` in at most ``keep`` characters: its head, ``...``, and its last quarter
    (a value's closing brackets or quote, a path's file name)."""
    if len(text) <= keep:
        return text
    tail = keep // 4
    return f"{text[:keep - tail - len(_MARK)]}{_MARK}{text[len(text) - tail:]}"


def error_line(message: str) -> str:
    """``error: MESSAGE`` on one line: whitespace runs (newlines too) become one space, each
    echoed value over 100 characters is cut to 80, and the line to MAX_LINE characters."""
    text = " ".join(message.split())
    text = _QUOTED.sub(lambda m: cut(m.group(0), MAX_VALUE), text)
    text = _RUN.sub(lambda m: cut(m.group(0), MAX_VALUE), text)
    return cut(f"error: {text}", MAX_LINE)
