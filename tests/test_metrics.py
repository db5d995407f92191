"""Metrics follow vllm bench serve's definitions and keys; checked on hand-traced runs."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.metrics import (
    _stat,
    compute_metrics,
    itl_pairs,
    itl_stat,
    kv_usage_series,
    p_word,
    parse_goodput,
    parse_percentile_metrics,
    parse_percentiles,
    save_result_json,
    vllm_result,
)
from kvplan.analysis.weighted import exact_dot, summarize
from kvplan.errors import InputError
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload
from tests import metrics_reference as reference

LIM = Limits(max_num_batched_tokens=8, max_num_seqs=10)


def _budget_trace():
    # A: tokens at 1, 2 (finish 2). B: tokens at 2, 3 (finish 3). 1 s per step.
    return simulate(workload([0, 0], [6, 5], [2, 2]), timer=LinearTimer(), num_blocks=100,
                    block_size=4, limits=LIM)


def test_vllm_definitions_on_a_hand_trace():
    m = compute_metrics(_budget_trace(), percentile_metrics=("ttft", "tpot", "itl", "e2el"),
                        percentiles=(50, 99.9))
    assert m.completed == 2 and m.failed == 0
    assert m.duration_s == 3.0
    assert m.total_input_tokens == 11 and m.total_output_tokens == 4
    assert m.request_throughput == pytest.approx(2 / 3)
    assert m.output_throughput == pytest.approx(4 / 3)
    assert m.total_token_throughput == pytest.approx(15 / 3)
    assert m.stats["ttft"].mean_ms == pytest.approx(1500.0)
    assert m.stats["ttft"].std_ms == pytest.approx(500.0)  # population std, like np.std
    assert m.stats["tpot"].mean_ms == pytest.approx(1000.0)  # (e2el - ttft) / (out - 1)
    assert m.stats["itl"].median_ms == pytest.approx(1000.0)
    assert m.stats["e2el"].mean_ms == pytest.approx(2500.0)
    keys = vllm_result(m)
    assert keys["p50_ttft_ms"] == pytest.approx(1500.0)
    assert "p99.9_e2el_ms" in keys and keys["request_goodput"] is None


def test_goodput_counts_requests_meeting_every_slo():
    r = _budget_trace()
    m = compute_metrics(r, goodput_ms={"ttft": 1000.0})
    assert m.request_goodput == pytest.approx(1 / 3)  # only A (ttft 1 s <= 1000 ms)
    m = compute_metrics(r, goodput_ms={"ttft": 2000.0, "e2el": 2000.0})
    assert m.request_goodput == pytest.approx(1 / 3)


def test_single_token_outputs_have_no_tpot_but_pass_tpot_goodput():
    r = simulate(workload([0], [4], [1]), timer=LinearTimer(), num_blocks=10, block_size=4,
                 limits=LIM)
    m = compute_metrics(r, goodput_ms={"tpot": 0.0})
    assert m.stats["tpot"].mean_ms == 0.0  # vLLM: np.mean(tpots or 0)
    assert m.request_goodput == pytest.approx(1.0)


def test_kv_metrics_and_save_result_round_trip(tmp_path):
    r = _budget_trace()
    m = compute_metrics(r)
    assert m.peak_kv_blocks == 4 and m.num_blocks == 100
    assert m.prefill_kv_share + m.decode_kv_share == pytest.approx(1.0)
    doc = save_result_json(r, m, {"model_id": "x"})
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    back = json.loads(path.read_text())
    assert back["itls"] == [[1.0], [1.0]] and back["ttfts"] == [1.0, 2.0]
    assert back["kv_usage"]["used_blocks"] == r.steps.used_blocks.tolist()
    assert back["completed"] == 2 and back["model_id"] == "x"


def test_kv_usage_series_keeps_peaks_when_binned():
    r = simulate(workload(list(np.arange(50) * 0.5), [30] * 50, [20] * 50), timer=LinearTimer(
        base_s=0.1), num_blocks=400, block_size=4, limits=LIM)
    s = kv_usage_series(r, max_points=10)
    assert len(s["used_blocks"]) == 10
    assert max(s["used_blocks"]) == r.peak_kv_blocks


def test_flag_parsers():
    assert parse_goodput(["ttft:200", "tpot:50 e2el:1000"]) == {
        "ttft": 200.0, "tpot": 50.0, "e2el": 1000.0}
    assert parse_percentile_metrics("ttft,e2el") == ("ttft", "e2el")
    assert parse_percentiles("50,90,99.9") == (50.0, 90.0, 99.9)
    assert p_word(99.0) == "99" and p_word(99.9) == "99.9"
    for bad in (lambda: parse_goodput(["itl:5"]), lambda: parse_goodput(["ttft=5"]),
                lambda: parse_percentile_metrics("foo"), lambda: parse_percentiles("101")):
        with pytest.raises(InputError):
            bad()


def test_duration_starts_at_the_benchmark_start_not_the_first_send():
    """vllm/benchmarks/serve.py, benchmark(): ``benchmark_start_time`` is taken before
    ``get_request`` sleeps ``delay_ts[0]`` (the first gamma gap) for the first request, and
    ``benchmark_duration`` ends after the last response. The workload clock's 0 is that start.

    Arrivals 2, 2; 1 s per step: A's tokens at 3, 4; B's at 4, 5. duration = 5 - 0, not 5 - 2.
    """
    r = simulate(workload([2, 2], [6, 5], [2, 2]), timer=LinearTimer(), num_blocks=100,
                 block_size=4, limits=LIM)
    assert r.finish_s.tolist() == [4.0, 5.0]
    m = compute_metrics(r, goodput_ms={"ttft": 1000.0})
    assert m.duration_s == 5.0
    assert m.request_throughput == pytest.approx(2 / 5)
    assert m.output_throughput == pytest.approx(4 / 5)
    assert m.request_goodput == pytest.approx(1 / 5)


def test_duration_counts_failed_requests_answered_last():
    """serve.py gathers every task (failed ones too) before it stops the duration clock: a
    rejected request sent after the last completion still extends ``duration``."""
    r = simulate(workload([0, 10], [4, 300], [2, 2]), timer=LinearTimer(), num_blocks=100,
                 block_size=4, limits=LIM, max_model_len=100)
    assert r.finish_s[0] == 2.0 and 1 in r.rejected
    m = compute_metrics(r)
    assert m.duration_s == 10.0 and m.failed == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False) | st.sampled_from(
           [0.0, 0.5, 0.5, 1.0, float("nan")]), min_size=0, max_size=60),
       st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=3))
def test_stat_is_numpys_mean_median_std_percentile_bit_for_bit(xs, ps) -> None:
    """_stat's figures are numpy's, and it leaves the array alone."""
    ref = np.array(xs, dtype=np.float64) if xs else np.zeros(1)
    v = np.array(xs, dtype=np.float64)
    s = _stat(v, ps)
    assert repr(v.tolist()) == repr(xs)
    want = (float(np.mean(ref)) * 1000, float(np.median(ref)) * 1000, float(np.std(ref)) * 1000,
            tuple((float(p), float(np.percentile(ref, p)) * 1000) for p in ps))
    got = (s.mean_ms, s.median_ms, s.std_ms, s.percentiles_ms)
    assert repr(got) == repr(want)  # repr: NaN == NaN, and -0.0 != 0.0


def _random_run(n, max_out, max_seqs, seed, blocks=40):
    rng = np.random.default_rng(seed)
    w = workload(np.sort(rng.random(n) * 5).tolist(), rng.integers(1, 60, n).tolist(),
                 rng.integers(1, 8 * max_out, n).tolist())
    timer = LinearTimer(base_s=0.1, per_token_s=1e-3 * (seed % 3), per_context_s=1e-5)
    return simulate(w, timer=timer, num_blocks=blocks, block_size=4,
                    limits=Limits(max_num_batched_tokens=24, max_num_seqs=max_seqs))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(1, 12), st.integers(0, 2**31),
       st.sampled_from([12, 40, 400]))
def test_itl_from_step_records_equals_the_per_token_computation(n, max_out, max_seqs, seed,
                                                                blocks) -> None:
    """itl_pairs expands to exactly the per-token gaps (the reference, itself == itl_s), and
    itl_stat gives their numpy figures: median and percentiles to the bit, mean and std to a
    few ulps (exact sums against numpy's pairwise ones), preemptions and split runs included."""
    r = _random_run(n, max_out, max_seqs, seed, blocks)
    ref = reference.itl_gaps(r)
    assert ref.tolist() == r.itl_s().tolist()
    values, counts = itl_pairs(r)
    assert sorted(np.repeat(values, counts).tolist()) == sorted(ref.tolist())
    ps = (0.0, 25.0, 50.0, 90.0, 99.0, 99.9, 100.0)
    got = itl_stat(r, ps)
    mean, median, std, pct = reference.itl_stat(r, ps)
    assert (got.median_ms, got.percentiles_ms) == (median, pct)
    assert got.mean_ms == pytest.approx(mean, rel=1e-13, abs=1e-12)
    assert got.std_ms == pytest.approx(std, rel=1e-12, abs=1e-9)
    if len(ref):  # the mean is the exact sum, rounded once, over N (numpy's division)
        assert got.mean_ms == float(sum(map(Fraction, ref.tolist()))) / len(ref) * 1000


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False,
                                    allow_infinity=False)
                          | st.sampled_from([0.0, 1e-300, 0.1, 0.1, 3.0, 2.0**-40]),
                          st.integers(0, 5) | st.integers(0, 3000)), max_size=40),
       st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=4))
def test_weighted_summary_is_numpys_on_the_expanded_sample(pairs, ps) -> None:
    values = np.array([v for v, _ in pairs], dtype=np.float64)
    counts = np.array([c for _, c in pairs], dtype=np.int64)
    full = np.repeat(values, counts) if counts.sum() else np.zeros(1)
    got = summarize(values, counts, ps)
    assert got.median == float(np.median(full))
    assert got.percentiles == tuple((float(p), float(np.percentile(full, p))) for p in ps)
    exact = sum((Fraction(v) * c for v, c in pairs), Fraction(0))
    assert exact_dot(values, counts) == float(exact)
    assert got.mean == float(exact) / len(full)
    assert got.mean == pytest.approx(float(np.mean(full)), rel=1e-12, abs=1e-300)
    assert got.std == pytest.approx(float(np.std(full)), rel=1e-9, abs=1e-12 * abs(got.mean))


def test_exact_dot_is_exact_where_floats_cancel() -> None:
    """1e16 + 1 - 1e16 (numpy: 0.0 or 2.0 by summation order); counts up to 2**33."""
    assert exact_dot(np.array([1e16, 1.0, -1e16]), np.array([1, 1, 1])) == 1.0
    assert exact_dot(np.array([0.1]), np.array([2**33])) == float(Fraction(0.1) * 2**33)
    assert exact_dot(np.zeros(0), np.zeros(0, dtype=np.int64)) == 0.0
