"""Each distinct failure the fuzz suite found, kept as a regression test (in-process, as the
suite runs them)."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from tests.fuzz.harness import run_cli, verdict


@pytest.mark.parametrize(
    "argv",
    [
        # Path('~0').expanduser() raised RuntimeError ("Could not determine home directory"):
        # a traceback for a model id, a GPU name or an output folder starting with '~user'
        ["capacity", "--gpu", "H100", "~0", "--json"],
        ["kv", "~0"],
        ["kv", "~nobody0/config.json"],
        ["capacity", "meta-llama/Llama-3.2-1B", "--gpu", "~0.yaml"],
        ["simulate", "meta-llama/Llama-3.2-1B", "--num-prompts", "2", "--save-result",
         "~0/x.json"],
    ],
)
def test_home_of_an_unknown_user_is_a_one_line_error(argv: list[str], tmp_path: Path) -> None:
    run = run_cli(argv, cwd=tmp_path)
    assert verdict(run) == "error", (run.err, run.crash)


def test_notes_follow_the_current_stderr_across_calls() -> None:
    """A second main() in one process wrote its notes to the first call's stderr (a handler
    bound once), so in-process runs lost them; each call now binds today's sys.stderr."""
    from kvplan.cli import main

    errs = []
    for _ in range(2):
        err = io.StringIO()
        argv, sys.argv = sys.argv, ["kvplan", "kv", "meta-llama/Llama-3.1-8B-Instruct", "--json"]
        try:
            with redirect_stdout(io.StringIO()), redirect_stderr(err), pytest.raises(SystemExit):
                main()
                sys.exit(0)
        finally:
            sys.argv = argv
        errs.append(err.getvalue())
    assert all(e.startswith("note: using the config of meta-llama/Llama-3.1-8B") for e in errs)
