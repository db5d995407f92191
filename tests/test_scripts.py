"""The scripts say what they do: setup names each stage, the test command counts its tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pytest_line() -> str:
    return next(line for line in (ROOT / "scripts/test.sh").read_text().splitlines()
                if "-m pytest" in line)


def test_test_command_prints_pytests_summary_with_the_count() -> None:
    args = _pytest_line().split("#")[0].split()
    assert args[:3] == [".venv/bin/python", "-m", "pytest"]
    flags = [a for a in args[3:] if a != '"$@"']
    proc = subprocess.run([sys.executable, "-m", "pytest", *flags, "tests/test_units.py"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert re.search(r"^\d+ passed in [\d.]+s", proc.stdout, re.M), proc.stdout


def test_setup_says_what_it_does_before_installing() -> None:
    lines = (ROOT / "scripts/setup.sh").read_text().splitlines()
    first_pip = next(i for i, line in enumerate(lines) if "pip install" in line
                     and not line.lstrip().startswith(("#", "echo")))
    said = [line for line in lines[:first_pip] if 'echo "setup: ' in line]
    assert len(said) >= 3  # creating .venv, installing (fresh), checking (existing)
    assert any("echo \"setup: ready" in line for line in lines[first_pip:])
