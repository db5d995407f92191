"""A COLUMNS or LINES of other digits ('²': str.isdigit says yes, int says no) is ignored as
'abc' is; it crashed rich's Console with a ValueError traceback. A count field given such
digits is refused by name, not with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvplan.analysis.calibration.measurement_checks import whole
from kvplan.errors import InputError


@pytest.mark.parametrize(("name", "value"), [("COLUMNS", "²"), ("LINES", "٣"), ("COLUMNS", "abc")])
def test_an_unreadable_terminal_size_is_ignored(name: str, value: str) -> None:
    env = dict(os.environ, **{name: value})
    run = subprocess.run([sys.executable, "-m", "kvplan", "capacity", "meta-llama/Llama-3.1-8B"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "Maximum concurrency for 131,072 tokens per request: 3.21x" in run.stdout


def test_a_count_of_other_digits_is_refused_by_name() -> None:
    with pytest.raises(InputError, match="tp"):
        whole("²", "tp")
    assert whole("12", "tp") == 12
