"""What every run does around its command, without typer: the notes handler, one-line errors."""

from __future__ import annotations

import sys


def notes_to_stderr() -> None:
    """The library's notes (logger ``kvplan``, level INFO) as ``note: ...`` lines on stderr."""
    import logging

    log = logging.getLogger("kvplan")
    for old in [h for h in log.handlers if getattr(h, "kvplan_notes", False)]:
        log.removeHandler(old)  # a second main() in one process: today's sys.stderr
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("note: %(message)s"))
    seen: set[str] = set()  # one note per kind: a model loaded twice says so once

    def first_time(record: logging.LogRecord) -> bool:
        text = record.getMessage()
        fresh = text not in seen
        seen.add(text)
        return fresh

    handler.addFilter(first_time)
    handler.kvplan_notes = True  # type: ignore[attr-defined]
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def fail(message: str) -> None:
    """One line on stderr (long values cut, at most 300 characters), exit status 2."""
    from kvplan.report.error_text import error_line

    print(error_line(message), file=sys.stderr)
    sys.exit(2)
