"""``python -m tests.zygote_probe ACTION``: prints the process state a CLI run would see
(one JSON line), then does ACTION; tests/test_cli_zygote.py compares a fresh interpreter's
answer with a run forked by tests/cli_zygote.py."""

from __future__ import annotations

import atexit
import faulthandler
import json
import os
import signal
import sys
import tempfile
import threading
import warnings

from tests.cli_zygote import PRELOAD


def state() -> dict[str, object]:
    for name in PRELOAD:  # what a CLI run imports too (numpy adds warning filters)
        __import__(name)
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))[:-1]  # less the listing's own
    main = sys.modules["__main__"]
    return {
        "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "fds": fds,
        "main": [os.path.basename(main.__file__ or ""), main.__package__],
        "env": os.environ.get("ZYGOTE_PROBE"), "tmp": tempfile.gettempdir(),
        "filters": [(a, str(m), c.__name__, str(mod), n) for a, m, c, mod, n in warnings.filters],
        "hooks": [sys.excepthook is sys.__excepthook__,
                  sys.unraisablehook is sys.__unraisablehook__,
                  threading.excepthook is threading.__excepthook__, faulthandler.is_enabled()],
        "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM,
                                                       signal.SIGPIPE, signal.SIGCHLD)],
        "stdio": [(s.encoding, s.errors, s.line_buffering, s.write_through,
                   type(s.buffer).__name__) for s in (sys.stdout, sys.stderr)],
        "stdin": sys.stdin.read(), "threads": threading.active_count(),
        "kvplan": sorted(m for m in sys.modules if m.split(".")[0] == "kvplan"),
    }


def act(action: str) -> None:
    atexit.register(lambda: print("atexit ran", flush=False))
    warnings.warn("probe warning", UserWarning, stacklevel=1)
    warnings.warn_explicit("hidden", DeprecationWarning, "x.py", 1, module="x")  # ignored
    sys.stdout.write("crlf\r\nend\r")
    if action == "raise":
        raise ValueError("probe failure")
    if action.startswith("exit:"):
        sys.exit(int(action[5:]) if action[5:].isdigit() else action[5:])


if __name__ == "__main__":
    print(json.dumps(state()))
    act(sys.argv[1])
