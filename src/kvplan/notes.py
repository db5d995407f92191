"""The library's notes: INFO records of the logger ``kvplan``, with ``logging`` imported only
when a note is made (a plain ``kvplan simulate`` makes none and never loads it).

``note(msg, *args)`` logs ``msg % args``; ``to_stderr()`` (the CLI) asks for each note as a
``note: ...`` line on stderr, once per text, from then on: the handler is put on the logger
here, at once if ``logging`` is already loaded, else with the first note.
"""

from __future__ import annotations

import sys
from typing import Any

_want_stderr = False


def note(msg: str, *args: Any) -> None:
    """Log ``msg % args`` at INFO on the logger ``kvplan``."""
    import logging

    if _want_stderr:
        _install(logging)
    logging.getLogger("kvplan").info(msg, *args)


def to_stderr() -> None:
    """Notes as ``note: ...`` lines on today's stderr, one per text (a model loaded twice
    says so once); a second call (a second main() in one process) replaces the handler."""
    global _want_stderr
    _want_stderr = True
    logging = sys.modules.get("logging")
    if logging is not None:
        _install(logging, replace=True)


def _install(logging: Any, *, replace: bool = False) -> None:
    log = logging.getLogger("kvplan")
    old = [h for h in log.handlers if getattr(h, "kvplan_notes", False)]
    if old and not replace:
        return
    for h in old:
        log.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("note: %(message)s"))
    seen: set[str] = set()

    def first_time(record: Any) -> bool:
        text = record.getMessage()
        fresh = text not in seen
        seen.add(text)
        return fresh

    handler.addFilter(first_time)
    handler.kvplan_notes = True
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
