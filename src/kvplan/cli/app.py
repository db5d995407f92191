"""The typer app, the shared error handling, and registration of every command module."""

from __future__ import annotations

import sys

import typer

from kvplan.errors import KvplanError

app = typer.Typer(
    name="kvplan",
    help="KV-cache memory, capacity, latency and serving simulation for LLM serving.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    """Each command module adds its commands to ``app`` (imports stay light)."""
    from kvplan.cli import cmd_kv  # noqa: F401


def main() -> None:
    """Console-script entry: user errors print one line to stderr and exit 2, no traceback."""
    _register()
    try:
        app(standalone_mode=False)
    except KvplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except (typer.Exit, SystemExit) as exc:
        code = exc.exit_code if isinstance(exc, typer.Exit) else exc.code
        sys.exit(code if isinstance(code, int) else 0)
    except (typer.BadParameter, typer.Abort) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            print(f"error: {exc.format_message()}", file=sys.stderr)
            sys.exit(2)
        raise
