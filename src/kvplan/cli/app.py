"""The typer app, the shared error handling, and registration of every command module."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Annotated

import typer
import typer.main

from kvplan.cli.fast import command_index
from kvplan.cli.fast.startup import fail as _fail
from kvplan.cli.fast.startup import notes_to_stderr as _notes_to_stderr
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from typer.core import TyperGroup

RICH_HELP = "KVPLAN_RICH_HELP"
"""Set to 1 for typer's rich help panels; by default help is click's plain text, which does
not import rich, markdown_it and pygments (about 60 ms of a 0.17 s `kvplan --help`)."""
BLAS_THREADS = "OPENBLAS_NUM_THREADS"
"""main() sets it to 1 unless it is set: numpy's OpenBLAS threads spin beside a simulation
(a third of its CPU, no wall-time gain) and beside each other in plan workers."""

app = typer.Typer(
    name="kvplan",
    help=command_index.ROOT_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help (it wraps the text, never cuts a flag name); KVPLAN_RICH_HELP=1: rich
    rich_markup_mode="rich" if os.environ.get(RICH_HELP, "") not in ("", "0") else None,
)


def _print_version(value: bool) -> None:
    if value:
        from kvplan import __version__

        print(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help=command_index.VERSION_HELP)] = False) -> None:
    """KV-cache memory, capacity, latency and serving simulation for LLM serving."""


COMMAND_MODULES = (
    "cmd_kv", "cmd_capacity", "cmd_latency", "cmd_calibrate", "cmd_simulate", "cmd_plan",
    "cmd_prices", "cmd_web",
)
"""Command modules, in help order; each adds its commands to ``app`` when imported."""


MULTI_VALUE_OPTIONS = ("--goodput", "--slo")
"""Options that take several space-separated values, as vLLM's (``--goodput ttft:500 tpot:50``)."""
_SLO_VALUE = re.compile(r"^[A-Za-z0-9_]+:(p[0-9.]+:)?[0-9.eE+-]+$")


def expand_multi_value(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """Rewrite ``--opt a b`` as ``--opt a --opt b`` for values shaped like ``name:number``."""
    out: list[str] = []
    option: str | None = None  # the multi-value option whose extra values we are reading
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        if option is not None and out[-1] != option and _SLO_VALUE.match(arg):
            out.append(option)
        elif option is not None and out[-1] != option:
            option = None
        if arg in options:
            option = arg
        out.append(arg)
    return out


COMMANDS = {name: module for name, (module, _) in command_index.COMMANDS.items()}
"""Command name -> the module that defines it (tests check it against the modules)."""


def _register(modules: tuple[str, ...] = COMMAND_MODULES) -> None:
    """Import command modules (each adds its commands to ``app``), kept in help order."""
    import importlib

    for name in modules:
        importlib.import_module(f"kvplan.cli.{name}")
    rank = {f"kvplan.cli.{name}": i for i, name in enumerate(COMMAND_MODULES)}
    app.registered_commands.sort(key=lambda c: rank.get(getattr(c.callback, "__module__", ""), 0))


def _command_for(args: list[str]) -> TyperGroup:
    """The click group for these arguments: one command's module when ``args[0]`` names a
    command (a run imports and builds only what it needs), every command otherwise (help,
    a mistyped name: the full list for suggestions)."""
    module = COMMANDS.get(args[0]) if args else None
    _register((module,) if module else COMMAND_MODULES)
    return typer.main.get_group(app)


def main() -> None:
    """Console-script entry: user errors print one line to stderr and exit 2, no traceback."""
    os.environ.setdefault(BLAS_THREADS, "1")  # before numpy is imported (BLAS_THREADS)
    from kvplan.cli.stdout_guard import StdoutFailed, exit_for, guard

    args = expand_multi_value(sys.argv[1:], MULTI_VALUE_OPTIONS)
    refuse_pasted_line(args)
    command = _command_for(args)
    _notes_to_stderr()
    try:
        with guard():
            _run(command, args)
    except StdoutFailed as failure:  # stdout is /dev/full, a closed pipe, ...
        exit_for(failure)


PASTED_LINE_COMMANDS = ("capacity", "latency", "simulate")
"""Commands that read a pasted ``vllm serve ...`` line after ``--`` (cli/fast/pasted_args.py)."""
_VLLM_LINE_START = re.compile(r"vllm|python3?|[A-Za-z_][A-Za-z0-9_]*=.*")


def refuse_pasted_line(args: list[str]) -> None:
    """A pasted vLLM command line after ``--`` given to a command that reads none: one
    ``error:`` line saying how to give its flags (click said only 'Got unexpected extra
    argument(s)', and a command with a required option named that option instead)."""
    if not args or args[0] not in COMMANDS or args[0] in (*PASTED_LINE_COMMANDS, "calibrate") or (
            "--" not in args):  # calibrate's files after -- may be named anything
        return
    rest = args[args.index("--") + 1:]
    if not rest or not _VLLM_LINE_START.fullmatch(rest[0]):
        return
    cmd = f"kvplan {args[0]}"
    readers = ", ".join(PASTED_LINE_COMMANDS[:-1]) + f" and {PASTED_LINE_COMMANDS[-1]}"
    _fail(f"{cmd} does not read a pasted vLLM command line (kvplan {readers} do); give the "
          f"flags as its own options: {cmd} MODEL --flag VALUE ... ({cmd} --help lists them)")


def _run(command: TyperGroup, args: list[str]) -> None:
    try:
        code = command(args=args, standalone_mode=False)
        if isinstance(code, int) and code:  # typer's Exit(130) on Ctrl-C comes back as 130
            sys.exit(code)
    except KvplanError as exc:
        _fail(str(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        _fail("aborted")
    except Exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            text = getattr(exc, "message", "")  # plain help (rich help printed itself)
            if text:
                print(text)
            sys.exit(0)
        message = getattr(exc, "format_message", None)
        if message is None:  # a bug, not a user error: let it show
            raise
        _fail(str(message()))
