"""The library's notes: INFO records of the logger ``kvplan``, with ``logging`` imported only
when a note is made (a plain ``kvplan simulate`` makes none and never loads it).

``note(msg, *args)`` logs ``msg % args``; ``to_stderr()`` (the CLI) asks for each note as a
``note: ...`` line on stderr, once per text, from then on: the handler is put on the logger
here, at once if ``logging`` is already loaded, else with the first note. ``collected()`` (the
web server) also keeps the texts made in the current thread or task while it is open, so an
answer can carry the lines the CLI would have printed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_want_stderr = False
_sink: ContextVar[list[str] | None] = ContextVar("kvplan_notes", default=None)


def note(msg: str, *args: Any) -> None:
    """Log ``msg % args`` at INFO on the logger ``kvplan`` (and keep it, once per text, in
    the list ``collected()`` holds open here)."""
    import logging

    sink = _sink.get()
    if sink is not None and (text := msg % args if args else msg) not in sink:
        sink.append(text)
    if _want_stderr:
        _install(logging)
    logging.getLogger("kvplan").info(msg, *args)


@contextmanager
def collected() -> Iterator[list[str]]:
    """The notes made in this thread (or task) while open, in order, each text once."""
    got: list[str] = []
    token = _sink.set(got)
    try:
        yield got
    finally:
        _sink.reset(token)


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
