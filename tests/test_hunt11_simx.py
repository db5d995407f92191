"""hunt11-simx: the serving simulator on exotic but valid deployments (PP, DP / EP, async
scheduling, hybrid, MLA and sliding-window models, long-prefill caps, short max_model_len,
tiny KV pools): vLLM 0.11's rules where kvplan got them wrong, and invariants that every
such run must keep (the compiled core equal to the Python loop to the bit, blocks within
the pool, every request finished or rejected with a reason, tokens conserved)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.serving import simulate_serving
from kvplan.errors import InputError
from kvplan.specs.requests.workload import WorkloadArgs
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli
from tests.core_helpers import assert_same, python_loop

# -- vLLM 0.11 refuses --async-scheduling with pipeline parallelism ---------------------------
# vllm/engine/arg_utils.py (EngineArgs.create_engine_config, since PR #19970 in 0.10.0, lifted
# only by PR #32359 in 2026): "Async scheduling is not supported with pipeline-parallel-size
# > 1." kvplan accepted the pair and priced it (max(stage, host) over a PP stage chain).

def test_async_scheduling_with_pp_is_refused() -> None:
    with pytest.raises(InputError, match=r"async-scheduling.*pipeline-parallel-size"):
        EngineConfig(async_scheduling=True, pipeline_parallel_size=2)
    # either alone stays valid, as in vLLM
    assert EngineConfig(async_scheduling=True).pipeline_parallel_size == 1
    assert EngineConfig(pipeline_parallel_size=4).async_scheduling is False


def test_async_scheduling_with_pp_cli_one_line() -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.1-70B", "-tp", "2", "-pp", "2",
                "--async-scheduling", "--num-prompts", "4")
    assert_one_line_error(r)
    assert "--pipeline-parallel-size" in r.err


# -- invariants on exotic deployments (hypothesis) ---------------------------------------------
# Each deployment is (model, GPU, engine flags); the KV pool is fixed with --kv-cache-memory so
# it is small enough to preempt, and max_model_len is short enough that some drawn requests
# are rejected. Every one was checked to start (no DoesNotFitError).

_DEPLOYMENTS = (
    ("meta-llama/Llama-3.1-8B", "H100", dict(kv_cache_memory_bytes=300 << 20)),
    ("meta-llama/Llama-3.1-70B", "H100", dict(tensor_parallel_size=2, pipeline_parallel_size=2,
                                              kv_cache_memory_bytes=300 << 20)),
    ("meta-llama/Llama-3.1-8B", "H100", dict(pipeline_parallel_size=4,
                                             kv_cache_memory_bytes=100 << 20)),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "H100", dict(tensor_parallel_size=4,
                                                      kv_cache_memory_bytes=300 << 20)),
    ("nvidia/Nemotron-H-56B-Base-8K", "H200", dict(tensor_parallel_size=2,
                                                   kv_cache_memory_bytes=2 << 30)),
    ("deepseek-ai/DeepSeek-V2-Lite", "H100", dict(kv_cache_memory_bytes=100 << 20)),
    ("openai/gpt-oss-20b", "H100", dict(kv_cache_memory_bytes=300 << 20)),
    ("google/gemma-3-27b-it", "H100", dict(tensor_parallel_size=2,
                                           kv_cache_memory_bytes=1 << 30)),
    ("mistralai/Mistral-7B-v0.1", "H100", dict(kv_cache_memory_bytes=300 << 20)),
)
_DP_DEPLOYMENTS = (
    ("Qwen/Qwen3-30B-A3B", "H200", dict(data_parallel_size=2, enable_expert_parallel=True,
                                        kv_cache_memory_bytes=300 << 20)),
    ("Qwen/Qwen3-30B-A3B", "H200", dict(data_parallel_size=2,
                                        kv_cache_memory_bytes=300 << 20)),
    ("deepseek-ai/DeepSeek-V2-Lite", "H200", dict(
        data_parallel_size=4, enable_expert_parallel=True, enable_dbo=True,
        all2all_backend="deepep_low_latency", kv_cache_memory_bytes=100 << 20)),
    ("openai/gpt-oss-20b", "H100", dict(data_parallel_size=2, enable_expert_parallel=True,
                                        kv_cache_memory_bytes=300 << 20)),
)


@st.composite
def _flags(draw, base: dict) -> dict:
    kw = dict(base, max_model_len=draw(st.sampled_from([600, 1000, 2000])))
    if draw(st.booleans()):
        kw["max_num_batched_tokens"] = draw(st.sampled_from([64, 256, 2048]))
    if draw(st.booleans()):
        kw["max_num_seqs"] = draw(st.sampled_from([2, 8, 64]))
    kw["long_prefill_token_threshold"] = draw(st.sampled_from([0, 0, 7, 100]))
    kw["enable_prefix_caching"] = draw(st.booleans())
    if kw.get("pipeline_parallel_size", 1) == 1:
        kw["async_scheduling"] = draw(st.booleans())
    return kw


@st.composite
def _workloads(draw) -> WorkloadArgs:
    return WorkloadArgs(
        num_prompts=draw(st.sampled_from([1, 5, 20, 60])),
        random_input_len=draw(st.sampled_from([20, 300, 900])),
        random_output_len=draw(st.sampled_from([1, 30, 200])),
        random_range_ratio=draw(st.sampled_from([0.0, 0.5, 0.9])),
        random_prefix_len=draw(st.sampled_from([0, 64, 200])),
        request_rate=draw(st.sampled_from([None, None, 4.0, 40.0])),
        max_concurrency=draw(st.none() | st.integers(1, 6)), seed=draw(st.integers(0, 50)))


def _check_invariants(res) -> None:
    """Every request finished xor rejected with a reason; blocks within the pool; times in
    order; tokens conserved (no preemption: the steps computed exactly what the finished
    requests needed less their prefix hits; with preemptions, at least that)."""
    fin = np.asarray(res.finished, dtype=bool)
    for i in range(len(fin)):
        assert bool(fin[i]) != (i in res.rejected), i
    assert all(isinstance(v, str) and v for v in res.rejected.values())
    assert int(np.max(res.steps.used_blocks, initial=0)) <= res.num_blocks - 1
    assert np.all(res.sent_s[fin] >= res.arrival_s[fin])
    assert np.all(res.scheduled_s[fin] >= res.sent_s[fin])
    assert np.all(res.first_token_s[fin] > res.scheduled_s[fin])
    assert np.all(res.finish_s[fin] >= res.first_token_s[fin])
    need = int(np.sum(res.prompt_tokens[fin] + res.output_tokens[fin] - 1
                      - res.prefix_hit_tokens[fin]))
    done = int(np.sum(res.steps.new_tokens))
    if int(np.sum(res.preemptions)) == 0:
        assert done == need, (done, need)
    else:
        assert done >= need, (done, need)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_DEPLOYMENTS).flatmap(
    lambda d: st.tuples(st.just(d[0]), st.just(d[1]), _flags(d[2]))), _workloads())
def test_exotic_core_equals_python_and_invariants(dep, work) -> None:
    model, gpu, kw = dep
    engine = EngineConfig(**kw)
    a = simulate_serving(model, gpu, engine, work).result
    with python_loop():
        b = simulate_serving(model, gpu, engine, work).result
    assert_same(a, b)
    _check_invariants(a)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(_DP_DEPLOYMENTS).flatmap(
    lambda d: st.tuples(st.just(d[0]), st.just(d[1]), _flags(d[2]))),
    _workloads().filter(lambda w: w.max_concurrency is None))
def test_dp_fleet_invariants(dep, work) -> None:
    model, gpu, kw = dep
    run = simulate_serving(model, gpu, EngineConfig(**kw), work)
    assert run.dp is not None
    _check_invariants(run.result)
    for rank in run.dp.ranks:  # each rank's own pool
        assert int(np.max(rank.steps.used_blocks, initial=0)) <= rank.num_blocks - 1
    steps = run.result.steps  # lockstep: each step lasts its slowest rank's seconds
    assert np.array_equal(steps.end_s, steps.start_s + run.dp.rank_step_s.max(axis=1))


def _output_throughput(res) -> float | None:
    """Output tokens per second over the run, as vllm bench serve counts them."""
    fin = np.asarray(res.finished, dtype=bool)
    if not fin.any():
        return None
    return float(res.output_tokens[fin].sum() / (res.finish_s[fin].max() - res.arrival_s.min()))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.sampled_from(_DEPLOYMENTS + _DP_DEPLOYMENTS).flatmap(
    lambda d: st.tuples(st.just(d[0]), _flags(d[2]))), _workloads())
def test_faster_gpu_never_lowers_throughput(dep, work) -> None:
    """H200 has H100's tensor cores and more bandwidth; the same pool (--kv-cache-memory),
    flags and trace must serve at least the H100's output throughput."""
    model, kw = dep
    if kw.get("data_parallel_size", 1) > 1 and work.max_concurrency is not None:
        return  # a DP fleet refuses closed loop (documented)
    engine = EngineConfig(**kw)
    slow_run = simulate_serving(model, "H100", engine, work)
    fast_run = simulate_serving(model, "H200", engine, work)
    if slow_run.dp is not None and fast_run.dp is not None and not np.array_equal(
            slow_run.dp.rank_of, fast_run.dp.rank_of):
        return  # the balancer routed differently: test_a_faster_dp_fleet_can_route_worse
    slow, fast = slow_run.result, fast_run.result
    assert slow.rejected.keys() == fast.rejected.keys()
    a, b = _output_throughput(slow), _output_throughput(fast)
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert b >= a * (1 - 1e-12), (a, b)


def test_a_faster_dp_fleet_can_route_worse() -> None:
    """The physics rule above holds for one engine and for a DP fleet that routes alike; a
    DP fleet's balancer (vLLM 0.11: the least waiting x 4 + running, from counts the
    coordinator forwards on its grid) sees other counts on a faster GPU and may route worse.
    gpt-oss-20b DP2+EP, 20 prompts through one API server: H100 routes requests 16-19 to
    ranks 1, 0, 1, 0 and serves 656.4 tok/s; H200 routes 1, 1, 0, 1 (rank 1 holds 11) and
    serves 638.4 tok/s, though each of its steps is faster (7.162 against 7.580 ms)."""
    kw = {"data_parallel_size": 2, "enable_expert_parallel": True,
          "kv_cache_memory_bytes": 314_572_800, "max_model_len": 600, "max_num_seqs": 8,
          "long_prefill_token_threshold": 7, "enable_prefix_caching": False}
    work = WorkloadArgs(num_prompts=20, random_input_len=20, random_output_len=30,
                        random_range_ratio=0.9, random_prefix_len=64, seed=22)
    runs = [simulate_serving("openai/gpt-oss-20b", g, EngineConfig(**kw), work)
            for g in ("H100", "H200")]
    assert all(r.dp is not None for r in runs)
    slow, fast = (r.dp for r in runs)
    assert slow is not None and fast is not None
    assert slow.rank_of[16:].tolist() == [1, 0, 1, 0]
    assert fast.rank_of[16:].tolist() == [1, 1, 0, 1]
    assert fast.rank_step_s[0, 0] < slow.rank_step_s[0, 0]
    a, b = (_output_throughput(r.result) for r in runs)
    assert a is not None and b is not None and b < a
    assert (round(a, 1), round(b, 1)) == (656.4, 638.4)
