"""Shared test helpers: run the CLI as a user would, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from tests import cli_zygote


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*args: str, cwd: str | None = None) -> CliResult:
    """Run `python -m kvplan ARGS...` and capture exit code, stdout and stderr: in a process
    forked from tests/cli_zygote.py's preloaded one (KVPLAN_TEST_SUBPROCESS=1: a fresh one)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    forked = cli_zygote.run(args, cwd, env, 300)  # a process forked with numpy etc. loaded
    if forked is not None:
        return CliResult(*forked)
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


def pytest_configure(config: pytest.Config) -> None:
    """Fork run_cli's zygote before test modules (and the kvplan modules they load) are
    imported: each CLI run then starts from a process that has run no kvplan code."""
    cli_zygote.start()
