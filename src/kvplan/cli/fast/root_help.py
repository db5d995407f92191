"""``kvplan --help`` (and ``kvplan`` alone) as click's plain help prints it, without typer:
the same layout from cli.command_index, or None where click would wrap a line."""

from __future__ import annotations

import os
import sys

from kvplan.cli.fast.command_index import COMMANDS, ROOT_HELP, VERSION_HELP

RICH_HELP = "KVPLAN_RICH_HELP"  # cli.app.RICH_HELP: typer's rich panels (typer prints them)
_MAX_WIDTH = 80
"""click's HelpFormatter: min(terminal columns, 80) - 2, at least 50."""


def program_name() -> str:
    """The name click shows after ``Usage:``: the script's name, or ``python -m PACKAGE`` when
    run as ``python -m kvplan``."""
    main = sys.modules.get("__main__")
    path = sys.argv[0] if sys.argv and sys.argv[0] else ""
    package = getattr(main, "__package__", None)
    if not package:
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def short_help(text: str, limit: int) -> str:
    """A command's summary cut to ``limit`` characters as click cuts it: at a sentence's end,
    else whole words and ``...``."""
    words = text.split()
    total = 0
    for i, word in enumerate(words):
        total += len(word) + (i > 0)
        if total > limit:
            break
        if word.endswith("."):
            return " ".join(words[: i + 1])
        if total == limit and i != len(words) - 1:
            break
    else:
        return " ".join(words)
    total += 3
    while i > 0:
        total -= len(words[i]) + 1
        if total <= limit:
            break
        i -= 1
    return " ".join(words[:i]) + "..."


def _rows(rows: list[tuple[str, str]], width: int) -> list[str] | None:
    first = min(max(len(name) for name, _ in rows), 30) + 2
    if any(len(name) > first - 2 or 2 + first + len(text) > width for name, text in rows):
        return None  # click would wrap here
    return [f"  {name}{' ' * (first - len(name))}{text}" for name, text in rows]


def help_width() -> int:
    """click's help width for this terminal (COLUMNS, else the terminal's, else 80)."""
    import shutil

    return max(min(shutil.get_terminal_size().columns, _MAX_WIDTH) - 2, 50)


def root_help() -> str | None:
    """The root help text, or None where typer must print it (rich help asked for, or a
    line click would wrap)."""
    if os.environ.get(RICH_HELP, "") not in ("", "0"):
        return None
    width = help_width()
    usage = f"Usage: {program_name()} [OPTIONS] COMMAND [ARGS]..."
    limit = width - 6 - max(len(name) for name in COMMANDS)
    options = _rows([("--version", VERSION_HELP), ("--help", "Show this message and exit.")],
                    width)
    commands = _rows([(n, short_help(h, limit)) for n, (_, h) in COMMANDS.items()], width)
    if options is None or commands is None or len(usage) > width or 2 + len(ROOT_HELP) > width:
        return None
    return "\n".join([usage, "", f"  {ROOT_HELP}", "", "Options:", *options, "", "Commands:",
                      *commands]) + "\n"
