"""The console-script entry: ``--version``, the root help and plain ``kvplan kv`` and
``kvplan simulate`` runs answered before typer loads (about half of kv's start-up, a sixth of
a 10,000-request simulate); everything else goes to typer (cli.app)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from kvplan.cli.fast import gc_pause

BLAS_THREADS = "OPENBLAS_NUM_THREADS"
_KV_OPTIONS = {"--kv-cache-dtype": ("kv_cache_dtype", str),
               "--tensor-parallel-size": ("tensor_parallel_size", int),
               "-tp": ("tensor_parallel_size", int), "--block-size": ("block_size", int)}
"""``kvplan kv``'s options (cmd_kv.kv_cmd; a test checks they are the same): field, parser."""


def kv_args(args: list[str]) -> tuple[str, dict[str, Any], bool] | None:
    """``kv MODEL [--opt VALUE | --opt=VALUE ...] [--json]`` as (model, settings, as_json),
    or None for anything else (help, a repeated or unknown option, a bad value): typer then
    parses it and says what is wrong in its own words."""
    if not args or args[0] != "kv":
        return None
    model: str | None = None
    settings: dict[str, Any] = {}
    as_json = False
    rest = args[1:]
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if arg == "--json" and not as_json:
            as_json = True
        elif name in _KV_OPTIONS and (eq or rest):
            value = value if eq else rest.pop(0)
            field, parse = _KV_OPTIONS[name]
            if field in settings or not value or value.startswith("-") or value != value.strip():
                return None
            try:
                settings[field] = parse(value)
            except ValueError:
                return None
        elif not arg.startswith("-") and model is None:
            model = arg
        else:
            return None
    return None if model is None else (model, settings, as_json)


class _Ran:
    fast = False
    """Whether this process ran a fast path (kv, simulate): ``console`` may then end it at
    once (quick_exit)."""


def console() -> None:
    """The console script and ``python -m kvplan``: ``main``, then, after a fast path, the
    process ends at once with its exit status (cli/fast/quick_exit.py: the interpreter's
    teardown skipped, its atexit handlers and flushes kept)."""
    try:
        main()
    except SystemExit as stop:
        if _Ran.fast:
            from kvplan.cli.fast import quick_exit

            quick_exit.end(stop.code)
        raise
    if _Ran.fast:
        from kvplan.cli.fast import quick_exit

        quick_exit.end(0)


def main() -> None:
    """Console-script entry: user errors print one line to stderr and exit 2, no traceback.

    The cyclic garbage collector is off while modules load and the command sets up (they
    make no garbage cycles; its passes over the growing heap were 5% of a 10,000-request
    ``simulate``): typer's commands and a simulation's metrics run with it on again
    (``gc_pause``), and it is restored however main ends (tests call main in-process)."""
    os.environ.setdefault(BLAS_THREADS, "1")  # before numpy is imported (cli.app.BLAS_THREADS)
    _drop_unreadable_sizes()
    gc_pause.pause()
    try:
        _dispatch(sys.argv[1:])
    finally:
        gc_pause.restore()


def _drop_unreadable_sizes() -> None:
    """A COLUMNS or LINES that is not a number is ignored, as rich ignores 'abc': one of
    other digits ('²', which str.isdigit accepts and int refuses) crashed rich's Console."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and not (value.isascii() and value.isdigit()):
            del os.environ[name]


def _dispatch(args: list[str]) -> None:
    if args == ["--version"]:
        from kvplan import __version__

        print(f"kvplan {__version__}")
        sys.exit(0)
    if args in ([], ["--help"]):
        from kvplan.cli.fast.root_help import root_help

        text = root_help()
        if text is not None:
            _guarded(lambda: sys.stdout.write(text))
            sys.exit(0)
    from kvplan.cli.fast.dataclass_code import install

    install()  # every command below defines dataclasses: their methods' code from the cache
    kv = kv_args(args)
    sim = _simulate_args(args) if kv is None else None
    if kv is None and sim is None:
        from kvplan.cli.app import main as typer_main

        gc_pause.resume()
        typer_main()
        return
    from kvplan.cli.fast.startup import notes_to_stderr

    _Ran.fast = True
    notes_to_stderr()
    if kv is not None:
        _guarded(lambda: _run_kv(*kv))
    else:
        _guarded(lambda: _run_simulate(sim))


def _simulate_args(args: list[str]) -> dict[str, Any] | None:
    if not args or args[0] != "simulate":
        return None
    from kvplan.cli.fast.simulate_args import simulate_args

    return simulate_args(args)


def _guarded(write: Callable[[], object]) -> None:
    """Run ``write`` with stdout guarded as cli.app.main does: a failed write is one error
    line (exit 2), a closed pipe a quiet exit 141."""
    from kvplan.cli.stdout_guard import StdoutFailed, exit_for, guard

    try:
        with guard():
            write()
    except StdoutFailed as failure:
        exit_for(failure)


def _run_kv(model: str, settings: dict[str, Any], as_json: bool) -> None:
    from kvplan.cli.fast.kv_answer import kv_answer
    from kvplan.cli.fast.startup import fail
    from kvplan.errors import KvplanError

    try:
        kv_answer(model, settings, as_json)
    except KvplanError as exc:
        fail(str(exc))
    except KeyboardInterrupt:  # Ctrl-C: exit 130, as typer's path (cli.app._run)
        sys.exit(130)
    except EOFError:  # as click answers it under typer
        print(file=sys.stderr)
        fail("aborted")


def _run_simulate(given: dict[str, Any] | None) -> None:
    from kvplan.cli.fast.simulate_run import run_simulate
    from kvplan.cli.fast.startup import fail
    from kvplan.errors import KvplanError

    try:
        run_simulate(given or {})
    except KvplanError as exc:
        fail(str(exc))
    except KeyboardInterrupt:  # Ctrl-C: exit 130, as typer's path (cli.app._run)
        sys.exit(130)
    except EOFError:  # as click answers it under typer
        print(file=sys.stderr)
        fail("aborted")
