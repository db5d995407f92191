"""Request lengths of public random-dataset runs as their benchmarks drew them
(kvplan.analysis.calibration.lengths): uniform ranges and outputs stopping at EOS."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.calibration import lengths as L
from kvplan.analysis.calibration.public_set import _workload, raw_points
from kvplan.errors import InputError


def test_uniform_lengths_by_hand() -> None:
    """Quantiles 1/8, 3/8, 5/8, 7/8 of U{1..4}: floor(1 + q x 4) = 1, 2, 3, 4."""
    assert sorted(L.uniform_lengths(4, 1, 4).tolist()) == [1, 2, 3, 4]
    u = L.uniform_lengths(640, 819, 1024)
    assert (u.min(), u.max(), u.mean()) == (819, 1024, 921.5)


def test_eos_hazard_by_hand() -> None:
    """cap 2: mean = (1 - (1 - p)^2) / p = 2 - p, so a mean of 1.5 is p = 0.5."""
    assert L.eos_hazard(2, 1.5) == pytest.approx(0.5, rel=1e-9)


def test_eos_lengths_mushfiq() -> None:
    """The RTX 4090 sweep: 300 outputs, cap 128, mean 100 -> p = 0.004057: (1 - p)^128 =
    exp(128 x ln 0.995943) = 0.59436 and (1 - 0.59436) / 0.004057 = 99.99; 59% reach the cap."""
    p = L.eos_hazard(128, 100.0)
    assert p == pytest.approx(0.004057, rel=1e-3)
    out = L.eos_lengths(300, 128, 100.0)
    assert out.mean() == pytest.approx(100.0, abs=0.1)
    assert (out.min(), out.max()) == (1, 128)
    assert (out == 128).mean() == pytest.approx((1 - p) ** 127, abs=0.01)
    assert np.array_equal(out, L.eos_lengths(300, 128, 100.0))  # deterministic


@settings(max_examples=60, deadline=None)
@given(cap=st.integers(2, 5000), frac=st.floats(0.0, 0.999), n=st.integers(200, 2000))
def test_eos_mean_matches(cap: int, frac: float, n: int) -> None:
    mean = 1.0 + frac * (cap - 1.0)
    if mean >= cap:
        return
    p = L.eos_hazard(cap, mean)
    assert L._capped_mean(p, cap) == pytest.approx(mean, rel=1e-6)
    out = L.eos_lengths(n, cap, mean)
    assert out.min() >= 1 and out.max() <= cap
    assert abs(out.mean() - mean) <= 1.0 + 0.01 * mean


def test_bad_ranges() -> None:
    with pytest.raises(InputError, match="below the cap"):
        L.eos_hazard(128, 128.0)
    with pytest.raises(InputError, match="need 1 <= lo <= hi"):
        L.uniform_lengths(10, 5, 4)


def test_public_points_draw_what_their_commands_say() -> None:
    """Every run whose outputs stopped at EOS names its cap; its replay has the printed mean;
    InferenceX's range-ratio runs replay U{819..1024}; a fixed-length run stays fixed."""
    by_id = {p["id"]: p for p in raw_points()}
    eos = [p for p in by_id.values() if "output_eos_cap" in p["workload"]]
    assert len(eos) == 7 + 22  # 7 above, 22 of GPUStack's random runs
    for p in eos:
        w = p["workload"]
        work = _workload(w)
        assert work.output_tokens.max() <= w["output_eos_cap"]
        assert work.output_tokens.mean() == pytest.approx(w["mean_output_len"], rel=0.01)
        assert "ignore-eos" in w["lengths"] or "stop at EOS" in w["lengths"], p["id"]
    semi = _workload(by_id["semianalysis-gpt-oss-120b-mi300x-tp1-1k1k-c64"]["workload"])
    assert (semi.prompt_tokens.min(), semi.prompt_tokens.max()) == (819, 1024)
    assert semi.closed_loop_concurrency == 64 and len(semi.prompt_tokens) == 640
    fixed = _workload(by_id["tenstorrent-qwen3-30b-a3b-a100-128-128-c1"]["workload"])
    assert set(fixed.output_tokens.tolist()) == {128}
