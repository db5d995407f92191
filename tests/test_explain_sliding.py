"""``latency --explain``: a sliding-window layer's attention row is priced over the pairs it
attends (at most its window per query), and the rows never add up to more than the step."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli


def _steps(model: str, *extra: str) -> dict[str, dict]:
    r = run_cli("latency", model, "--gpu", "H100", "--prompt", "8192", "--output", "4",
                "--json", *extra)
    assert r.code == 0, r.err
    return {s["phase"]: s for s in r.json()["step_ops"]}


@pytest.mark.parametrize("model", ["openai/gpt-oss-20b", "google/gemma-3-27b-it"])
def test_rows_never_exceed_the_step(model: str) -> None:
    """The step minus its listed ops ("overheads + rest") is never negative: gpt-oss-20b's
    8,192-token prefill listed its sliding layers at 75.96 ms against a 112 ms step, leaving
    -61.82 ms of "rest" (its sliding rows had been priced over full causal pairs)."""
    for s in _steps(model).values():
        assert s["kernels_s"] <= s["step_s"], s
        assert sum(o["seconds"] for o in s["ops"]) == pytest.approx(s["kernels_s"])


def test_sliding_prefill_row_is_its_window() -> None:
    """gpt-oss-20b: 12 sliding layers of window 128 and 12 full layers, the same heads. An
    8,192-token prompt scores 8,192 x 8,193 / 2 = 33,558,528 pairs per full layer and
    sum(min(j, 128), j = 1..8,192) = 8,256 + 8,064 x 128 = 1,040,448 per sliding layer
    (32.3x fewer): the sliding row is far below the full row."""
    pre = {o["op"]: o["seconds"] for o in _steps("openai/gpt-oss-20b")["prefill"]["ops"]}
    assert pre["attention_sliding"] < pre["attention_full"] / 3
