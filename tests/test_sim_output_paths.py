"""Vectorised output paths equal their per-request definitions (itls, rejected list)."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.metrics import per_request_itls, rejected_list
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, poisson_workload, workload


def test_per_request_itls_equal_diff_of_token_times_under_preemption():
    w = poisson_workload(60, rate=40.0, prompt=(1, 40), output=(1, 25), seed=3)
    lim = Limits(max_num_batched_tokens=32, max_num_seqs=6)
    r = simulate(w, timer=LinearTimer(base_s=0.01, per_token_s=1e-4), num_blocks=20,
                 block_size=4, limits=lim, max_model_len=60)
    assert r.total_preemptions > 0 and r.rejected  # the awkward cases are present
    want = [np.diff(r.token_times(i)).tolist() for i in np.flatnonzero(r.finished).tolist()]
    assert per_request_itls(r) == want


def test_rejected_list_sorted_by_index():
    r = simulate(workload([0, 0, 0], [5, 500, 600], [2, 2, 2]), timer=LinearTimer(),
                 num_blocks=10, block_size=4, max_model_len=100)
    assert [d["index"] for d in rejected_list(r)] == [1, 2]
    assert per_request_itls(r) == [[1.0]]


def test_trace_cache_round_trip_and_invalidation(tmp_path, monkeypatch):
    from kvplan.specs.requests import trace_cache
    from kvplan.specs.requests.traces import bundled_trace_path, load_csv_trace

    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "t.csv"
    src.write_bytes(bundled_trace_path("mooncake-synthetic").read_bytes())
    first = load_csv_trace(src)  # parsed, then cached
    assert len(list((tmp_path / "cache" / "traces").glob("*.npz"))) == 1
    calls = []
    real = trace_cache.read_csv_trace
    monkeypatch.setattr(trace_cache, "read_csv_trace", lambda *a: calls.append(a) or real(*a))
    again = load_csv_trace(src)
    assert calls == []  # served from the cache
    for f in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert np.array_equal(getattr(first, f), getattr(again, f))
        assert not getattr(again, f).flags.writeable
    assert len(again.prefix_hashes) == len(first.prefix_hashes)
    assert all(np.array_equal(a, b) for a, b in zip(first.prefix_hashes, again.prefix_hashes,
                                                      strict=True))
    assert again.hash_block_tokens == first.hash_block_tokens == 512
    lines = src.read_text().splitlines(keepends=True)
    src.write_text("".join(lines[:-1]))  # new content: a new key, parsed again
    shorter = load_csv_trace(src)
    assert len(calls) == 1 and len(shorter) == len(first) - 1
    for entry in (tmp_path / "cache" / "traces").glob("*.npz"):
        entry.write_bytes(b"not a zip")  # corrupt entries are parsed again
    assert len(load_csv_trace(src)) == len(shorter) and len(calls) == 2


def test_trace_cache_never_hides_a_malformed_file(tmp_path, monkeypatch):
    import pytest

    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import load_csv_trace

    monkeypatch.setenv("KVPLAN_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "bad.csv"
    bad.write_text("input_length,output_length\n10,x\n")
    for _ in range(2):
        with pytest.raises(TraceError, match="line 2"):
            load_csv_trace(bad, "input=input_length,output=output_length")
    assert not list((tmp_path / "cache").glob("**/*.npz"))
