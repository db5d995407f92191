"""What every run does around its command, without typer: the notes handler, one-line errors."""

from __future__ import annotations

import sys


def notes_to_stderr() -> None:
    """The library's notes (logger ``kvplan``, level INFO) as ``note: ...`` lines on stderr
    (kvplan.notes.to_stderr: ``logging`` loads with the first note, if one comes)."""
    from kvplan.notes import to_stderr

    to_stderr()


def fail(message: str) -> None:
    """One line on stderr (long values cut, at most 300 characters), exit status 2."""
    from kvplan.report.error_text import error_line

    print(error_line(message), file=sys.stderr)
    sys.exit(2)
