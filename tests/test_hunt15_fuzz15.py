"""Session 15 fuzz hunt (fuzz15): CLI output paths and inputs found by a throwaway driver."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.fuzz2_support import L1B, MCSV, assert_error, run_case

# ------------------------------------------------- a read-only output file

READ_ONLY_CASES = [
    ["report", L1B, "--gpu", "H100", "-o", "out.html"],
    ["capacity", L1B, "--gpu", "H100", "--plot", "out.svg"],
    ["simulate", L1B, "--num-prompts", "3", "--save-result", "out.json"],
    ["calibrate", "m.csv", "--force", "--out", "out.json"],
]


@pytest.mark.parametrize("argv", READ_ONLY_CASES, ids=lambda a: a[0])
def test_a_read_only_output_is_refused_not_replaced(argv: list[str], tmp_path: Path) -> None:
    """Was: 'wrote out.html (replaced)', exit 0: the temporary-file-then-rename write replaced
    a file the user had made read-only (chmod 444), which `>` or vllm bench serve's
    open(path, 'w') refuse for its owner. Now one error line naming the mode, exit 2, before
    any work; the file keeps its bytes and its mode."""
    out = tmp_path / argv[-1]
    out.write_text("keep me\n")
    out.chmod(0o444)
    result = run_case(tmp_path, argv, {"m.csv": MCSV})
    assert_error(result, f"{argv[-2]} {argv[-1]} is read-only (mode 0444)")
    assert out.read_text() == "keep me\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o444
