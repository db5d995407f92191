"""Help at 80 columns names every flag whole, and ``kvplan --version`` prints the version."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kvplan.cli.app import COMMANDS

ROOT = Path(__file__).resolve().parents[1]


def _help(*args: str, columns: int = 80) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    proc = subprocess.run([sys.executable, "-m", "kvplan", *args, "--help"], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return proc.stdout


def _flags(command: str) -> list[str]:
    """Every option string the command declares (long, short and --no- forms)."""
    import typer.main

    from kvplan.cli.app import _register, app

    _register()
    group = typer.main.get_group(app)
    cmd = group.commands[command]
    return [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_at_80_columns_names_every_flag_whole(command: str) -> None:
    text = _help(command)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    words = set(re.findall(r"-{1,2}[A-Za-z0-9][A-Za-z0-9-]*", text))
    missing = [f for f in _flags(command) if f not in words]
    assert not missing, missing


def test_simulate_help_golden_lines_at_80_columns() -> None:
    """Before: rich cut '--tensor-parallel-…' and '--enable-prefix-ca…' at 80 columns."""
    lines = _help("simulate").splitlines()
    assert "  -tp, --tensor-parallel-size <int>" in lines
    assert "  --enable-prefix-caching / --no-enable-prefix-caching" in lines
    assert "  --long-prefill-token-threshold <int>" in lines


def test_version_matches_the_package_metadata() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    proc = subprocess.run([sys.executable, "-m", "kvplan", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"kvplan {version}\n", "")


def test_root_help_lists_version_flag() -> None:
    assert "--version" in _help()
