"""Standard output that cannot be written: one ``error:`` line (or, for a closed pipe, the
quiet exit a pipeline expects), never a traceback.

``kvplan kv MODEL > /dev/full`` fails in ``print`` (ENOSPC), or only when Python flushes the
buffer at exit; ``kvplan models | head -1`` gets EPIPE once ``head`` is gone. ``guard()``
wraps ``sys.stdout`` so that a failed write or flush, and only that, raises ``StdoutFailed``
(not an OSError, so no other handler mistakes it for a file error), and flushes before it
hands stdout back so that a late failure is seen too. ``exit_for`` then ends the run:

* a closed pipe (EPIPE): nothing on stderr, exit 141 (128 + SIGPIPE, what a shell reports for
  a command killed by a closed pipe, as ``seq 100000 | head -1`` is);
* anything else (a full disk, a file over its size limit, an I/O error): ``error: cannot
  write to standard output: ...``, exit 2.

Either way the real stdout is pointed at /dev/null first, so the interpreter's own flush at
exit cannot raise again.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

SIGPIPE_EXIT = 128 + 13
"""Exit status for a closed stdout pipe: 128 + SIGPIPE, as shells report a process it ended."""


class StdoutFailed(Exception):
    """A write to (or flush of) standard output failed; ``error`` is the OSError."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _Guarded:
    """Stands in for sys.stdout: writes and flushes pass through, their OSError is tagged."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def write(self, text: str) -> int:
        try:
            return int(self._real.write(text))
        except OSError as exc:
            raise StdoutFailed(exc) from None

    def flush(self) -> None:
        try:
            self._real.flush()
        except OSError as exc:
            raise StdoutFailed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextmanager
def guard() -> Iterator[None]:
    """Within: stdout writes that fail raise StdoutFailed; on leaving, stdout is flushed."""
    real = sys.stdout
    sys.stdout = _Guarded(real)
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        finally:
            sys.stdout = real


def exit_for(failure: StdoutFailed) -> NoReturn:
    """End the run after stdout failed (see the module docstring)."""
    _silence_stdout()
    if failure.error.errno == errno.EPIPE:
        sys.exit(SIGPIPE_EXIT)
    print(f"error: cannot write to standard output: {_why(failure.error)}; "
          "write to a file or a pipe that can take it", file=sys.stderr)
    sys.exit(2)


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    if exc.errno == errno.EFBIG:
        return "the file passed its size limit"
    return (exc.strerror or type(exc).__name__).lower()


def _silence_stdout() -> None:
    """Point the process's stdout at /dev/null (when it is a real descriptor)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # an in-memory stream (tests): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
