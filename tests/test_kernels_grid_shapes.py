"""grid.lookup prices each axis at its own size (a GEMM's n and k once beside 8,192 token
counts): every answer and status equals the lookup on the coordinates broadcast first (the
way it ran before), to the bit, on every bundled GPU's tables."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.costs.kernels.grid import lookup, seconds
from kvplan.costs.kernels.tables import manifest, table

TABLES = [(g, f) for g, e in manifest()["gpus"].items() for f, t in e["tables"].items()
          if "engine" in t]


def _sizes(axis: np.ndarray, draw: st.DrawFn, n: int) -> np.ndarray:
    """Sizes below, on, between and past the axis's nodes."""
    lo, hi = float(axis[0]), float(axis[-1])
    picks = st.one_of(st.sampled_from([float(x) for x in axis]),
                      st.floats(lo / 4, hi * 4, allow_nan=False), st.just(1.0))
    return np.array([draw(picks) for _ in range(n)])


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_scalar_axes_give_the_broadcast_answer_to_the_bit(data: st.DataObject) -> None:
    gpu, family = data.draw(st.sampled_from(TABLES))
    t = table(gpu, family)
    assert t is not None
    row = data.draw(st.integers(0, len(t.keys) - 1))
    n = data.draw(st.integers(1, 40))
    coords = []
    for axis in t.axes:  # each axis: one size (a 0-d value) or n of them
        if data.draw(st.booleans()):
            coords.append(_sizes(axis, data.draw, n))
        else:
            coords.append(np.array(_sizes(axis, data.draw, 1)[0]))
    got_s, got_status = lookup(t, row, tuple(coords))
    want_s, want_status = lookup(t, row, tuple(np.broadcast_arrays(*coords)))
    assert got_s.shape == want_s.shape == np.broadcast_shapes(*(c.shape for c in coords))
    assert got_s.tobytes() == want_s.tobytes()
    assert np.array_equal(got_status, want_status)


def test_a_line_of_token_counts_beside_one_n_and_k_is_the_broadcast_answer() -> None:
    """The path gemm_times takes (grid._line_corners: the first axis a line, the rest one
    value each) on every bundled table with more than one axis, at 1..8,192 tokens."""
    checked = 0
    for gpu, family in TABLES:
        t = table(gpu, family)
        assert t is not None
        if len(t.axes) < 2:
            continue
        rest = [np.array(float(np.sqrt(a[0] * a[-1]))) for a in t.axes[1:]]  # between nodes
        for row in range(0, len(t.keys), max(1, len(t.keys) // 3)):
            line = np.arange(1, 8193, dtype=np.float64)
            got_s, got_status = lookup(t, row, (line, *rest))
            want_s, want_status = lookup(t, row, tuple(np.broadcast_arrays(line, *rest)))
            assert got_s.tobytes() == want_s.tobytes()
            assert np.array_equal(got_status, want_status)
            checked += 1
    assert checked > 20


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_seconds_alone_are_the_lookups_seconds_to_the_bit(data: st.DataObject) -> None:
    """grid.seconds (gemm_s's path: no per-point Status) gives lookup's floats, for a line of
    sizes beside single values and for every axis a line."""
    gpu, family = data.draw(st.sampled_from(TABLES))
    t = table(gpu, family)
    assert t is not None
    row = data.draw(st.integers(0, len(t.keys) - 1))
    n = data.draw(st.integers(1, 300))
    line = data.draw(st.booleans())
    coords = [_sizes(a, data.draw, n) if i == 0 or not line
              else np.array(_sizes(a, data.draw, 1)[0]) for i, a in enumerate(t.axes)]
    got = seconds(t, row, tuple(coords))
    assert got.tobytes() == lookup(t, row, tuple(coords))[0].tobytes()


def test_gemm_s_is_gemms_seconds_on_every_gpu_and_dtype() -> None:
    """kernels.gemm_s on a planner's line (1..8,192 tokens beside one n and k) and on
    broadcast arrays equals gemm(...).seconds to the bit, every bundled GPU and dtype."""
    from kvplan.costs.kernels import gemm, gemm_s, measured_gpus

    rng = np.random.default_rng(0)
    line = np.arange(1, 8193)
    checked = 0
    for gpu in measured_gpus():
        for dtype in ("bfloat16", "fp8", "fp8_block", "nvfp4"):
            n, k = (int(x) for x in rng.integers(64, 60_000, size=2))
            ms, ns = rng.integers(1, 30_000, size=9), rng.integers(1, 50_000, size=9)
            for m, nn in ((line, n), (ms, ns)):
                want = gemm(gpu, m, nn, k, dtype).seconds
                assert gemm_s(gpu, m, nn, k, dtype).tobytes() == want.tobytes()
                checked += 1
    assert checked == 2 * 4 * len(measured_gpus())
