"""Shared test helpers: run the CLI as a user would, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*args: str, cwd: str | None = None) -> CliResult:
    """Run `python -m kvplan ARGS...` and capture exit code, stdout and stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.run(
        [sys.executable, "-m", "kvplan", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=env,  # tables at the pipe width, whatever width the test runner set
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line_error(result: CliResult) -> None:
    """A user error: exit 2, one line on stderr, no traceback, nothing on stdout."""
    assert result.code == 2, (result.code, result.out, result.err)
    assert "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert result.err.startswith("error: ")


@pytest.fixture
def cli():
    return run_cli
