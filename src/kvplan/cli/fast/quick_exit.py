"""The process's end after a fast path (``kvplan kv``, ``kvplan simulate``): what the
interpreter's own exit does that anyone can see, then ``os._exit`` with the same status.

Why: tearing the interpreter down frees every module's objects one by one (numpy's among
them) and collects once more; none of it shows in the output, and it was about a tenth of
a 10,000-request ``simulate --json``'s instructions (valgrind: 0.98 G with the teardown,
0.88 G without) and of its CPU time.

What still happens, in the order ``Py_FinalizeEx`` does it: the ``atexit`` handlers (the
dataclass code cache is saved there, ``logging`` flushes its handlers), then stdout and
stderr are flushed. Where that cannot be done the same way the normal exit runs instead:
a status that is not an int in 0..255 (Python prints a string status), another Python
thread still alive (the interpreter would wait for it), a profiler or tracer set (cProfile,
coverage: they write their reports at the normal exit), or a flush that fails (the
interpreter reports it).

Only the console script and ``python -m kvplan`` end this way (``entry.console``); a caller
of ``entry.main`` (the tests) gets its process back as before.
"""

from __future__ import annotations

import atexit
import os
import sys


def end(status: object) -> None:
    """End the process now with ``status`` (None is 0); returns only where the normal exit
    must run instead (see the module docstring)."""
    code = 0 if status is None else status
    if not isinstance(code, int) or not 0 <= code <= 255 or _watched():
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a failed flush, or a closed stream: as the exit says it
        return
    os._exit(code)


def _watched() -> bool:
    """Another thread alive, or a profiler or tracer that reports at the normal exit."""
    threading = sys.modules.get("threading")
    return ((threading is not None and threading.active_count() > 1)
            or sys.getprofile() is not None or sys.gettrace() is not None)
