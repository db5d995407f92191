"""A trace replayed on its own arrival times is saved with request_rate 'trace' (there is no
rate: 'inf' would tell `kvplan calibrate` to send every prompt at once and fit a 455% error),
and `kvplan calibrate` refuses such a file in one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SIM = [sys.executable, "-m", "kvplan", "simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
       "--num-prompts", "20"]


def _saved(tmp_path: Path, *extra: str) -> dict[str, object]:
    out = tmp_path / "r.json"
    subprocess.run([*SIM, *extra, "--save-result", str(out)], check=True, capture_output=True)
    doc: dict[str, object] = json.loads(out.read_text())
    return doc


def test_a_timed_trace_has_no_rate(tmp_path: Path) -> None:
    assert _saved(tmp_path, "--dataset", "azure-conv")["request_rate"] == "trace"


def test_a_rate_or_a_burst_is_written_as_before(tmp_path: Path) -> None:
    assert _saved(tmp_path, "--dataset", "azure-conv", "--request-rate", "4")[
        "request_rate"] == 4.0
    assert _saved(tmp_path)["request_rate"] == "inf"  # random prompts, all at t = 0


def test_calibrate_refuses_a_trace_replay_in_one_line(tmp_path: Path) -> None:
    _saved(tmp_path, "--dataset", "azure-conv")
    r = subprocess.run([sys.executable, "-m", "kvplan", "calibrate", str(tmp_path / "r.json"),
                        "--gpu", "H100"], capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "request_rate 'trace'" in lines[0]
    assert "Traceback" not in r.stderr
