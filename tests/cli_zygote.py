"""``run_cli``'s process launcher: each run is still its own process, forked from a "zygote"
that has numpy, typer, click and rich imported already, instead of a fresh interpreter that
imports them again (about 0.3 s of every one of the suite's ~1,000 CLI runs on a loaded
2-core machine, a third of its wall time).

The run itself is what ``python -m kvplan ARGS`` does: a new process with its own stdin
(/dev/null), stdout and stderr (files, read back as subprocess.run(text=True) reads pipes),
its own cwd and environment, sys.argv, ``__main__`` and sys.path[0] set by runpy as ``-m``
sets them, default signal handlers, no atexit handler of pytest's, and the interpreter's
ending: an uncaught exception prints its traceback and exits 1, SystemExit's code is the
status, atexit handlers run and stdio is flushed. Nothing kvplan computes is shared between
runs: the zygote never imports a kvplan module, so every run imports its own modules, reads
its environment and fills its caches afresh (tests/test_cli_zygote.py checks all of this
against a fresh interpreter).
``KVPLAN_TEST_SUBPROCESS=1`` goes back to a fresh interpreter per run.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from typing import Any

PRELOAD = ("numpy", "typer", "click", "rich.console", "rich.table", "rich.text")
"""Imported once in the zygote: third-party packages only (they read the environment when
called, not when imported), none of kvplan's modules."""
_HEADER = struct.Struct("!I")


class _Zygote:
    """The forked server: requests (JSON) on one pipe, a run's pid and status on the other."""

    def __init__(self) -> None:
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        self.tmp = tempfile.mkdtemp(prefix="kvplan-cli-")
        atexit.register(shutil.rmtree, self.tmp, True)  # the runs' files are gone already
        self.pid = os.fork()
        if self.pid == 0:  # the zygote
            os.close(req_w)
            os.close(ans_r)
            _serve(req_r, ans_w)
        os.close(req_r)
        os.close(ans_w)
        self.req, self.ans = req_w, ans_r
        self.lock = threading.Lock()
        self.count = 0

    def run(self, args: tuple[str, ...], cwd: str | None, env: dict[str, str],
            timeout: float, module: str) -> tuple[int, bytes, bytes]:
        with self.lock:
            self.count += 1
            out, err = (os.path.join(self.tmp, f"{self.count}.{n}") for n in ("out", "err"))
            _send(self.req, {"args": list(args), "cwd": cwd, "env": env, "out": out,
                             "err": err, "module": module})
            pid = _read_int(self.ans, None)
            status = _read_int(self.ans, timeout)
            if status is None:
                os.kill(pid, signal.SIGKILL)
                _read_int(self.ans, None)
                raise subprocess.TimeoutExpired(["kvplan", *args], timeout)
            with open(out, "rb") as f_out, open(err, "rb") as f_err:
                data = f_out.read(), f_err.read()
            os.unlink(out)
            os.unlink(err)
            return os.waitstatus_to_exitcode(status), data[0], data[1]


def _send(fd: int, request: dict[str, Any]) -> None:
    data = json.dumps(request).encode()
    os.write(fd, _HEADER.pack(len(data)) + data)


def _read_exact(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("the CLI zygote is gone")
        data += chunk
    return data


def _read_int(fd: int, timeout: float | None) -> int | None:
    if timeout is not None and not select.select([fd], [], [], timeout)[0]:
        return None
    return int(_HEADER.unpack(_read_exact(fd, _HEADER.size))[0])


def _serve(req: int, ans: int) -> None:
    """The zygote's loop (never returns): preload, then fork one child per request."""
    try:
        _close_fds_but(req, ans)
        _fresh_interpreter_hooks()
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as kvplan's main() sets it
        for name in PRELOAD:
            __import__(name)
        while True:
            try:
                size = _HEADER.unpack(_read_exact(req, _HEADER.size))[0]
            except EOFError:
                break
            request = json.loads(_read_exact(req, size))
            pid = os.fork()
            if pid == 0:
                os.close(req)
                os.close(ans)
                _child(request)
            os.write(ans, _HEADER.pack(pid))
            os.write(ans, _HEADER.pack(os.waitpid(pid, 0)[1]))
    finally:
        os._exit(0)


def _close_fds_but(*keep: int) -> None:
    """Only stdio and ``keep`` open, as subprocess's close_fds leaves a child."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2 and int(name) not in keep:
            with contextlib.suppress(OSError):  # the listing's own fd, closed already
                os.close(int(name))


def _fresh_interpreter_hooks() -> None:
    """Undo what pytest changed in this process and a fresh interpreter would not have:
    warnings recorded instead of printed (pytest's catch_warnings), its excepthooks and
    unraisable hook, faulthandler, SIGINT handling, a cached temp folder."""
    import faulthandler
    import importlib
    import tempfile
    import warnings

    importlib.reload(warnings)  # printing again, to the interpreter's own filter list
    sys.excepthook = sys.__excepthook__
    sys.unraisablehook = sys.__unraisablehook__
    threading.excepthook = threading.__excepthook__
    faulthandler.disable()
    tempfile.tempdir = None


def _child(request: dict[str, Any]) -> None:
    """One run, as ``python -m kvplan ARGS`` would do it; ends the process."""
    import runpy

    _std_files(request["out"], request["err"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["cwd"] is not None:
        os.chdir(request["cwd"])
    atexit._clear()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGCHLD):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT
                      else signal.SIG_DFL)
    sys.argv = ["-m", *request["args"]]
    sys.path[0] = os.getcwd()
    code = _run_main(runpy, request["module"])
    os._exit(_finish(code))


def _std_files(out: str, err: str) -> None:
    """fd 0 = /dev/null, fd 1 and 2 = the files; sys.std* fresh as at interpreter start
    with pipes: the encoding, errors and buffering (PYTHONUNBUFFERED) of this interpreter's
    own, which started with the same environment."""
    import io

    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    like = sys.__stdout__ if sys.__stdout__ is not None else sys.stdout
    raw = not isinstance(getattr(like, "buffer", None), io.BufferedWriter)  # python -u
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=like.encoding,
        errors=like.errors)
    for fd in (1, 2):
        model = sys.__stderr__ if fd == 2 and sys.__stderr__ is not None else like
        binary = io.FileIO(fd, "w", closefd=False)
        stream = io.TextIOWrapper(binary if raw else io.BufferedWriter(binary),
                                  encoding=model.encoding, errors=model.errors,
                                  line_buffering=fd == 2 and not raw, write_through=raw)
        if fd == 1:
            sys.stdout = sys.__stdout__ = stream
        else:
            sys.stderr = sys.__stderr__ = stream


def _run_main(runpy: Any, module: str) -> int:
    """runpy's ``-m`` entry; the status the interpreter would exit with."""
    import traceback

    try:
        runpy._run_module_as_main(module)
    except SystemExit as stop:
        if stop.code is None:
            return 0
        if isinstance(stop.code, int):
            return stop.code
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException as exc:  # what the interpreter does with it
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # from runpy on
        traceback.print_exception(type(exc), exc, tb)
        return 1
    return 0


def _finish(code: int) -> int:
    """The interpreter's ending: threads joined, atexit handlers, stdio flushed."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # the interpreter: status 120
            code = 120 if code == 0 else code
    return code & 0xFF


_zygote: _Zygote | None = None
_start = threading.Lock()


def start() -> _Zygote | None:
    """The zygote, forked now if it is not yet (conftest's pytest_configure forks it before
    any test module is imported, so it holds no kvplan module and no test's state); None
    with KVPLAN_TEST_SUBPROCESS=1."""
    global _zygote
    if os.environ.get("KVPLAN_TEST_SUBPROCESS", "") not in ("", "0"):
        return None
    with _start:
        if _zygote is None:
            _zygote = _Zygote()
    return _zygote


def run(args: tuple[Any, ...], cwd: Any, env: dict[str, str], timeout: float,
        module: str = "kvplan") -> tuple[int, str, str] | None:
    """(exit status, stdout, stderr) of ``python -m MODULE ARGS``; None when the zygote is
    switched off (KVPLAN_TEST_SUBPROCESS=1): the caller then starts a fresh interpreter."""
    zygote = start()
    if zygote is None:
        return None
    code, out, err = zygote.run(tuple(os.fspath(a) for a in args),
                                 None if cwd is None else os.fspath(cwd), env, timeout, module)
    return code, _text(out), _text(err)


def _text(data: bytes) -> str:
    """As subprocess.run(text=True) decodes a pipe: the locale's encoding, universal
    newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")
