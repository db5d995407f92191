"""Run the CLI in-process on one generated input and check the contract.

The property, for every input: exit 0 with valid output (with ``--json``: stdout is exactly one
strict JSON object, no NaN/Infinity, byte counts whole, non-negative and below 1 EiB), or exit 2
with exactly one ``error: `` line on stderr and nothing on stdout (``note:``/``warning:`` lines
may come before it); never a traceback or another exit status, never longer than the
per-example time limit, and never a changed input file. With a standard output whose writes
fail (``stdout=ENOSPC``...), the run must end in that one error line; with a closed pipe
(``EPIPE``) it may instead exit 141 with nothing but notes on stderr, as a process that
SIGPIPE ended.
"""

from __future__ import annotations

import errno
import io
import json
import os
import resource
import signal
import sys
import traceback
from collections import Counter
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TIME_LIMIT_S = float(os.environ.get("KVPLAN_FUZZ_TIME_LIMIT_S", "20"))
"""Per-example wall-clock limit; a run past it is a hang."""
MEMORY_LIMIT_BYTES = int(float(os.environ.get("KVPLAN_FUZZ_MEMORY_GIB", "4")) * 2**30)
"""RLIMIT_DATA while a run is in progress: a run that reads without end (``/dev/zero`` as an
input) gets MemoryError, a failure the suite reports, instead of the kernel's OOM killer ending
the whole session. (RLIMIT_AS would kill chart rendering: V8 reserves address space.)"""
MAX_BYTES = 2**60
"""1 EiB: no real deployment holds more; a byte count above it is absurd."""
SIDE_LINES = ("note: ", "warning: ", "wrote ")
"""stderr lines allowed beside the answer (or before the one error line)."""

COUNTS: dict[str, Counter[str]] = {}
"""family -> outcome -> runs (printed at the end of the session by conftest.py)."""


class Hang(BaseException):
    """Raised by the alarm when one run passes TIME_LIMIT_S (BaseException: main() lets it go)."""


@dataclass
class Run:
    argv: list[str]
    code: int | None = None
    out: str = ""
    err: str = ""
    crash: str | None = None
    """The traceback of an exception that escaped main(), or 'hang'."""
    changed_inputs: list[str] = field(default_factory=list)
    stdout_fails: str = ""
    """'' or the errno name every stdout write failed with (ENOSPC, EPIPE, ...)."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


class _FailingStdout(io.StringIO):
    """A standard output whose every write fails with one errno (a full disk, a closed pipe)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.errno = getattr(errno, name)

    def write(self, text: str) -> int:
        raise OSError(self.errno, os.strerror(self.errno))


def run_cli(argv: list[str], inputs: Sequence[Path] = (), cwd: Path | None = None,
            env: Sequence[tuple[str, str]] = (), stdout: str = "") -> Run:
    """``kvplan ARGV`` through the console-script entry, in this process, time-limited, with
    ENV set for the run and (``stdout`` an errno name) a standard output that cannot be
    written."""
    from kvplan.cli import main

    before = {p: _read(p) for p in inputs}
    run, err = Run(argv=list(argv), stdout_fails=stdout), io.StringIO()
    out = _FailingStdout(stdout) if stdout else io.StringIO()
    old_env = {k: os.environ.get(k) for k, _ in env}
    os.environ.update({k: v.replace("{root}", str(cwd or ".")) for k, v in env})
    old_argv, old_cwd = sys.argv, os.getcwd()
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    old_memory = _limit_memory()
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    try:
        sys.argv = ["kvplan", *argv]
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            main()
        run.code = 0
    except SystemExit as exc:
        run.code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang:
        run.crash = f"hang: over {TIME_LIMIT_S:.0f} s"
    except BaseException:
        run.crash = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_DATA, old_memory)
        sys.argv = old_argv
        os.chdir(old_cwd)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    run.out, run.err = out.getvalue(), err.getvalue()
    run.changed_inputs = [str(p) for p, data in before.items() if _read(p) != data]
    return run


def _limit_memory() -> tuple[int, int]:
    """Lower RLIMIT_DATA's soft limit for one run; returns the limits to restore."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = MEMORY_LIMIT_BYTES if hard == resource.RLIM_INFINITY else min(hard, MEMORY_LIMIT_BYTES)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    return soft, hard


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def _absurd_numbers(obj: Any, key: str = "") -> list[str]:
    """Byte counts that are not whole, negative or above 1 EiB; any negative size or time."""
    bad: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            bad += _absurd_numbers(v, str(k))
    elif isinstance(obj, list):
        for v in obj:
            bad += _absurd_numbers(v, key)
    elif isinstance(obj, int | float) and not isinstance(obj, bool):
        is_bytes = key.endswith("bytes") or key.endswith("_bytes_per_token")
        negative = key.endswith(("_s", "_ms", "_tokens")) and obj < 0 and not key.startswith(
            "delta_")  # a lever's change may be negative
        if negative or (is_bytes and (not float(obj).is_integer() or obj < 0 or obj > MAX_BYTES)):
            bad.append(f"{key}={obj!r}")
    return bad


def verdict(run: Run) -> str:
    """'ok' or 'error' when the contract holds, else a description of the breach."""
    if run.crash is not None:
        return f"crash: {run.crash}"
    if run.changed_inputs:
        return f"changed input files: {run.changed_inputs}"
    lines = [line for line in run.err.splitlines() if line.strip()]
    if "Traceback" in run.err:
        return f"traceback on stderr: {run.err[-2000:]}"
    if run.stdout_fails:
        return _failing_stdout_verdict(run, lines)
    if run.code == 2:
        errors = [line for line in lines if line.startswith("error: ")]
        others = [line for line in lines if not line.startswith(("error: ", *SIDE_LINES))]
        if len(errors) != 1 or others or (lines and lines[-1] != errors[0]) or run.out.strip():
            return f"unclean error: stderr={run.err!r} stdout={run.out[:500]!r}"
        return "error"
    if run.code == 1:
        return _answered_no(run, lines)
    if run.code != 0:
        return f"exit {run.code}: {run.err[-2000:]}"
    strays = [line for line in lines if not line.startswith(SIDE_LINES)]
    if strays:
        return f"exit 0 with stray stderr: {strays[:3]}"
    if "--json" in run.argv and "--help" not in run.argv:
        return _json_verdict(run.out)
    return "ok"


def _failing_stdout_verdict(run: Run, lines: list[str]) -> str:
    """stdout could not be written: one error line and exit 2, or (a closed pipe) a quiet 141."""
    quiet = all(line.startswith(SIDE_LINES) for line in lines)
    if run.code == 141 and run.stdout_fails == "EPIPE" and quiet:
        return "error"
    errors = [line for line in lines if line.startswith("error: ")]
    # exit 1 is plan's / capacity's answered "no" (docs/planner.md), told on stderr
    answered_no = run.code == 1 and ("plan" in run.argv or "capacity" in run.argv)
    if (run.code == 2 or answered_no) and len(errors) == 1 and lines[-1] == errors[0] and all(
            line.startswith(SIDE_LINES) for line in lines[:-1]):
        return "error"
    return f"stdout failing with {run.stdout_fails}: exit {run.code}, stderr={run.err[-500:]!r}"


def _answered_no(run: Run, lines: list[str]) -> str:
    """Exit 1 (docs/planner.md): plan found nothing feasible / capacity does not fit — an
    answer, not an error: the whole JSON object, the plan's table, or one error line."""
    if "plan" not in run.argv and "capacity" not in run.argv:
        return f"exit 1: {run.err[-2000:]}"
    if "--json" in run.argv and "--help" not in run.argv:
        return _json_verdict(run.out)
    if "plan" in run.argv:
        return "ok" if "nothing feasible" in run.out else f"exit 1 without why: {run.out[-500:]!r}"
    errors = [line for line in lines if line.startswith("error: ")]
    return "ok" if len(errors) == 1 and not run.out.strip() else f"unclean exit 1: {run.err!r}"


def _json_verdict(out: str) -> str:
    try:
        obj = json.loads(out, parse_constant=_reject_constant)
    except ValueError as exc:
        return f"--json output is not one strict JSON object ({exc}): {out[:300]!r}"
    if not isinstance(obj, dict):
        return f"--json output is not an object: {out[:200]!r}"
    bad = _absurd_numbers(obj)
    return f"absurd numbers in JSON: {bad[:5]}" if bad else "ok"


def check(family: str, run: Run) -> None:
    """Count the outcome and fail the example (hypothesis shrinks it) on any breach."""
    outcome = verdict(run)
    COUNTS.setdefault(family, Counter())[outcome if outcome in ("ok", "error") else "FAIL"] += 1
    assert outcome in ("ok", "error"), f"kvplan {' '.join(run.argv)}\n{outcome}"
