"""The planner's fast paths give the bits of the loops they replace (plan_speed, issue 20)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.analysis.plan import bounds as bd
from kvplan.analysis.plan.fleet import Replica
from kvplan.errors import KvplanError
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.plan_helpers import poisson_workload, slo

ENGINES = [
    {"max_num_batched_tokens": 512},
    {"max_num_batched_tokens": 2048, "kv_cache_dtype": "fp8"},
    {"quantization": "fp8", "max_num_seqs": 128},
    {"tensor_parallel_size": 2, "max_num_batched_tokens": 16384},
    {"tensor_parallel_size": 4, "enable_chunked_prefill": False},
    {"tensor_parallel_size": 2, "pipeline_parallel_size": 2},
    {"async_scheduling": True, "max_num_batched_tokens": 1000},
]
MODELS = ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "google/gemma-2-9b-it",
          "deepseek-ai/DeepSeek-V2-Lite", "Qwen/Qwen3-Next-80B-A3B-Thinking"]
GPUS = ["H100", "H200", "B200", "A100-80GB", "L40S"]


def _loops(rep: Replica, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ttft = np.array([bd.prefill_alone_s(rep, int(p)) for p in points])
    tpot = np.array([rep.timer.step_time_s(bd._ints([1]), bd._ints([int(p)])) for p in points])
    return ttft, tpot


def _replicas() -> list[Replica]:
    out = []
    for name in MODELS:
        m = load_model(name)
        for gpu in GPUS:
            for flags in ENGINES:
                try:
                    out.append(Replica(Deployment(model=m, gpu=load_gpu(gpu), engine=EngineConfig(
                        max_model_len=min(32768, m.max_position_embeddings), **flags))))
                except KvplanError:
                    continue
    return out


@pytest.mark.parametrize("top", [1, 7, 600, 2048, 9000, 32768])
def test_grid_priced_at_once_equals_the_loops_bitwise(top: int) -> None:
    """Every grid point's prefill-alone and decode seconds from one array call are the loops'
    to the bit, on dense, MoE, sliding-window and MLA models (those two fall back), every
    GPU, chunk sizes below, at and past the tables, pipeline and async engines."""
    reps = _replicas()
    fast = 0
    for rep in reps:
        points = bd._grid(top)
        got = bd._priced_at_once(rep, points.tolist())
        want = _loops(rep, points)
        if got is None:
            continue
        fast += 1
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
    assert len(reps) > 60 and fast > len(reps) // 3


def test_zero_load_verdict_unchanged_by_the_grid_memo() -> None:
    """The memoised grid (per workload) gives the verdict a fresh one gives."""
    m = load_model("meta-llama/Llama-3.1-8B")
    rep = Replica(Deployment(model=m, gpu=load_gpu("H100"),
                             engine=EngineConfig(max_model_len=4096)))
    work = poisson_workload(300, 5.0, prompt=3000, output=200, seed=3)
    s = slo("ttft:p99:500", "tpot:p90:30")
    first = bd.bounds(rep, work, s)
    assert bd.bounds(rep, work, s) == first
    bd._GRIDS.clear()
    again = bd.bounds(rep, work, s)
    assert again.zero_load.achieved == first.zero_load.achieved
    assert again.ceilings_rps == first.ceilings_rps


def _samples() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    out = [np.array([3.0]), np.array([2.0, 1.0]), np.zeros(5), np.array([1.0, np.nan, 2.0])]
    for n in (3, 10, 99, 100, 101, 367, 368, 369, 500, 1000, 4999, 10_000):
        out.append(rng.exponential(100.0, n))
        out.append(rng.integers(0, 7, n).astype(np.float64))  # many ties
        out.append(np.sort(rng.lognormal(3, 2, n)) * 1000)
    with_nan = rng.exponential(1.0, 400)
    with_nan[17] = np.nan
    return [*out, with_nan, np.full(50, 1e12)]


@pytest.mark.parametrize("p", [0.5, 1.0, 10.0, 33.3, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0])
def test_judged_percentile_is_numpys_and_the_interval_to_the_bit(p: float) -> None:
    """One partition gives np.percentile and percentile_interval exactly (ties, NaN, n = 1)."""
    from kvplan.analysis.plan.noise import judged_percentile, percentile_interval

    for v in _samples():
        got, ci = judged_percentile(v, p)
        want = np.float64(np.percentile(v, p))
        assert np.array_equal(np.float64(got), want, equal_nan=True)
        assert np.float64(got).tobytes() == want.tobytes()
        if not np.isnan(v).any():
            assert ci == percentile_interval(v, p)
        alone, none = judged_percentile(v, p, interval=False)
        assert np.float64(alone).tobytes() == want.tobytes() and none is None
    assert judged_percentile(np.zeros(0), p)[0] == 0.0


def test_counted_zero_load_verdict_is_the_judged_one() -> None:
    """The zero-load verdict from grid times and judged counts equals judging every request
    (1-token outputs, a warm-up window, p50 to p100, an empty TPOT sample), and SLOs with
    an E2EL or goodput term take the judged path."""
    from kvplan.analysis.plan.judge import judge

    work = poisson_workload(400, 8.0, prompt=6000, output=40, seed=1)
    short = poisson_workload(50, 8.0, prompt=900, output=1, seed=2, spread=0.0)
    slos = [slo("ttft:p99:2000", "tpot:p99:100"), slo("tpot:p50:10", "ttft:p100:300"),
            slo("ttft:p90:1000", "e2el:p99:9000"), slo("ttft:p95:700", "tpot:p99.9:40")]
    for rep in _replicas()[::3]:
        for w in (work, short):
            for s in slos:
                for _ in range(2):  # the first call counts, the second reads the counts
                    got, ttft0 = bd._zero_verdict(rep, w, s)
                    lat, want_ttft0 = bd.zero_load(rep, w, s)
                    assert got == judge(lat, s, intervals=False)
                    assert ttft0.tobytes() == want_ttft0.tobytes()
