"""Chart downsampling: exact when the corners fit, peaks and steps kept when they do not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.timeline import request_timeline
from kvplan.report.charts import staircase_chart
from kvplan.report.downsample import MAX_POINTS, corners, downsample, even_sample, keep_indices
from kvplan.specs.catalog import load_model
from kvplan.specs.kv import kv_spec


def step_line(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The value a step-after line through (x, y) draws at each of ``at``."""
    return y[np.searchsorted(x, at, side="right") - 1]


def test_corners_of_a_staircase() -> None:
    y = np.array([0, 0, 0, 5, 5, 5, 9, 9], dtype=float)
    assert corners(y).tolist() == [0, 2, 3, 5, 6, 7]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=3, max_size=400), st.integers(3, 5))
def test_few_corners_redraw_the_same_step_line(jumps: list[int], every: int) -> None:
    y = np.cumsum([j if i % every == 0 else 0 for i, j in enumerate(jumps)]).astype(float)
    x = np.arange(len(y), dtype=float)
    idx = keep_indices(x, y, max_points=len(y) // 2 + 2)
    if len(idx) <= len(y) // 2 + 2 and len(corners(y)) <= len(y) // 2 + 2:
        assert np.array_equal(step_line(x[idx], y[idx], x), y)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=2, max_size=3000))
def test_peaks_ends_and_size_are_kept(values: list[float]) -> None:
    y = np.array(values)
    x = np.arange(len(y), dtype=float)
    (xs, ys), = downsample(x, {"y": y}, max_points=100).values()
    assert len(xs) <= 100 + 2
    assert ys.max() == y.max() and xs[0] == 0 and xs[-1] == len(y) - 1
    assert set(ys.tolist()) <= set(y.tolist())


def test_even_sample_keeps_first_and_last() -> None:
    v = np.arange(10_000, dtype=float)
    s = even_sample(v, 400)
    assert len(s) == 400 and s[0] == 0 and s[-1] == 9_999


def test_long_request_chart_is_small_and_keeps_the_staircase() -> None:
    # Llama-3.1-8B, 131,072 B/token: 4 chunks of 512 -> 64, 128, 192, 256 MiB
    tl = request_timeline(kv_spec(load_model("meta-llama/Llama-3.1-8B")), 2048, 30_000,
                          chunk_tokens=512)
    spec = staircase_chart(tl, "m").to_dict()
    lines, marks = spec["layer"]
    rows = lines["data"]["values"]
    logical = [r for r in rows if r["series"] == "logical"]
    assert len(rows) <= 2 * (MAX_POINTS + 2)
    assert [r["MiB"] for r in logical[1:5]] == [64.0, 128.0, 192.0, 256.0]
    assert max(r["MiB"] for r in logical) == tl.final_bytes / 2**20
    assert lines["encoding"]["x"]["scale"]["type"] == "symlog"
    assert len(marks["data"]["values"]) == 4 + 2  # each chunk, first and last decode step
