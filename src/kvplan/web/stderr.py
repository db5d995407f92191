"""The lines `kvplan ... --json` prints on stderr beside its JSON -- the library's notes
(``note: ...``) and the commands' warnings (``warning: ...``) -- carried by a web answer as
the key ``stderr``, present only when there is a line (so an answer without one is the CLI's
JSON key for key); the page shows each line under the answer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kvplan.web.jobs import Job, Work


def lines(notes: Iterable[str], *warnings: str | None) -> list[str]:
    """``note: ...`` per note, then each warning given (None: none), each text once."""
    out: list[str] = []
    for line in [f"note: {n}" for n in notes] + [w for w in warnings if w]:
        if line not in out:
            out.append(line)
    return out


def with_stderr(doc: dict[str, Any], got: Iterable[str]) -> dict[str, Any]:
    """``doc`` with its ``stderr`` lines (unchanged when there is none)."""
    got = list(got)
    return {**doc, "stderr": got} if got else doc


def noted(work: Work, before: Iterable[str] = ()) -> Work:
    """A job's work whose answer carries the notes made before it started (``before``: made
    while the request was checked) and those its thread makes while it runs."""
    from kvplan.notes import collected

    earlier = list(before)

    def run(job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
        with collected() as got:
            doc, charts = work(job)
        return with_stderr(doc, lines([*earlier, *got])), charts

    return run
