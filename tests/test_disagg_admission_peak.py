"""A decode instance holds a transferred prompt's whole blocks from admission until its KV has
crossed the link; its peak KV counts them even when no step runs in between (fuzz-4: an
all-sliding-window model's out-of-window blocks are freed at its first decode step, so the
step samples alone read 257 blocks where 500 were held)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ARGS = ["simulate", "mistralai/Mistral-7B-v0.1", "--gpu", "H100", "--disagg", "1P1D",
        "--dataset", "random", "--random-input-len", "8000", "--random-output-len", "50",
        "--num-prompts", "1", "--kv-cache-memory", "2GiB", "--json"]


def _run(core: str) -> dict:
    env = {**os.environ, "KVPLAN_SIM_CORE": core}
    r = subprocess.run([sys.executable, "-m", "kvplan", *ARGS], capture_output=True, text=True,
                       env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("core", ["", "python"])
def test_decode_peak_counts_the_blocks_held_during_the_transfer(core: str) -> None:
    """8,000 tokens in 16-token pages = 500 blocks on each side; 2 GiB of 2 MiB blocks (32
    layers x 2 x 8 KV heads x 128 x 2 B x 16 tokens) = 1,024, 1,023 usable: 500 / 1,023."""
    doc = _run(core)
    assert doc["prefill_peak_kv_blocks"] == doc["decode_peak_kv_blocks"] == 500
    assert doc["decode_peak_kv_usage"] == pytest.approx(500 / 1023)
    assert doc["completed"] == 1
