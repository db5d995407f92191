"""The compiled core on every KV layout kvplan models: several layer groups (full + sliding
window, two windows, weights > 1), state layers of hybrid models, MLA and sliding-window
pricing, long-prefill caps. Core == Python loop == step-by-step path, to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.costs.memory.plan import plan_memory
from kvplan.costs.step.batch import AggregateForm
from kvplan.costs.step.roofline import StepCostModel
from kvplan.sim import core
from kvplan.sim.blocks import CacheGroup, KvShape, _group_blocks, kv_shape_from_groups
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import ArrayWorkload, LinearTimer, poisson_workload
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.core_helpers import FormTimer, assert_same, python_loop

BUILT = core.module() is not None
MAX_TOKENS = 160


def _form(draw) -> AggregateForm:
    """A form with every optional term: tables a + b * T, a window, MLA's prefill path."""
    t = np.arange(MAX_TOKENS + 1, dtype=np.float64)
    x = [draw(st.sampled_from([0.0, 1e-6, 3e-5, 2e-4, 1e-3])) for _ in range(12)]
    return AggregateForm(
        max_tokens=MAX_TOKENS, gemm=x[0] + 1e-4 * t, weights=0.002 + x[1] * t,
        state=x[2] * t, kv_write=x[3] * t,
        allreduce=(x[4] + 1e-6 * t) if draw(st.booleans()) else None,
        p2p=(x[5] + 1e-6 * t) if draw(st.booleans()) else None,
        lm_per_request=x[6], attn_per_pair=x[7] / 100, kv_per_context=x[8] / 10,
        state_per_request=x[9], layer_s=1e-3, pp_minus_1=float(draw(st.integers(0, 2))),
        request_s=x[10], overhead_s=(0.004, 0.004 + x[11]),
        window=draw(st.sampled_from([0, 1, 3, 8, 17])), sliding_attn_per_pair=3e-6,
        sliding_kv_per_context=2e-6, mla=draw(st.booleans()), mla_prefill_per_pair=5e-7,
        mla_context_per_token=7e-7)


@st.composite
def shapes(draw, block_size: int) -> KvShape:
    """1-4 groups, at least one of attention: full, sliding (windows 1..17), state."""
    groups = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["full", "sliding", "sliding", "state"]))
        groups.append(CacheGroup(
            kind=kind, window=draw(st.sampled_from([1, 3, 8, 17])) if kind == "sliding" else 0,
            weight=1 if kind == "state" else draw(st.integers(1, 3)),
            bytes_per_token=draw(st.integers(0, 9)) if kind != "state" else 0,
            state_bytes=draw(st.integers(1, 500)) if kind == "state" else 0))
    if all(g.kind == "state" for g in groups):
        groups.append(CacheGroup(bytes_per_token=5))
    return KvShape(block_size=block_size, groups=tuple(groups))


@st.composite
def cases(draw):
    n = draw(st.integers(1, 30))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.001, 0.05, 0.3, 2.0]), min_size=n,
                         max_size=n))
    w = ArrayWorkload(
        arrival_s=np.cumsum(gaps),
        prompt_tokens=np.array(draw(st.lists(st.integers(0, 70) | st.integers(1, 9),
                                             min_size=n, max_size=n))),
        output_tokens=np.array(draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))),
        closed_loop_concurrency=draw(st.none() | st.integers(1, 6)))
    lim = Limits(max_num_batched_tokens=draw(st.integers(1, MAX_TOKENS)),
                 max_num_seqs=draw(st.integers(1, 10)), chunked_prefill=draw(st.booleans()),
                 prefix_caching=draw(st.booleans()),
                 long_prefill_token_threshold=draw(st.sampled_from([0, 0, 1, 3, 17])))
    b = draw(st.sampled_from([1, 2, 4, 16]))
    shape = draw(shapes(b))
    peak = max(shape.blocks_one(int(p + o - 1)) for p, o in zip(
        w.prompt_tokens.tolist(), w.output_tokens.tolist(), strict=True))
    cfg = dict(num_blocks=max(2, peak + 1 + draw(st.integers(0, 2 * peak + 2)))
               if draw(st.booleans()) else draw(st.integers(2, 300)), block_size=b,
               limits=lim, kv=shape, max_model_len=draw(st.none() | st.integers(20, 200)))
    timer = FormTimer(_form(draw)) if draw(st.booleans()) else LinearTimer(
        base_s=0.01, per_token_s=1e-4, per_context_s=1e-6)
    return w, cfg, timer


@settings(max_examples=300, deadline=None)
@given(cases())
def test_core_equals_the_python_loop_and_the_step_by_step_path_on_every_layout(case):
    w, cfg, timer = case
    got = simulate(w, timer=timer, validate=True, **cfg)
    with python_loop():
        fast = simulate(w, timer=timer, validate=True, **cfg)
    assert_same(got, fast)
    assert_same(got, simulate(w, timer=timer, fast=False, **cfg))


REAL = [("google/gemma-3-27b-it", "H100", 1, 1100), ("openai/gpt-oss-120b", "H200", 2, 846),
        ("Qwen/Qwen3-Next-80B-A3B-Thinking", "H200", 4, 62),
        ("deepseek-ai/DeepSeek-V2-Lite", "H100", 1, 206), ("google/gemma-2-9b-it", "H100", 1, 1618)]


@pytest.mark.parametrize(("model", "gpu_id", "tp", "blocks"), REAL)
def test_real_models_run_in_the_core_with_preemptions(model, gpu_id, tp, blocks,
                                                      monkeypatch) -> None:
    """`kvplan simulate`'s set-up (plan_memory's groups, the roofline timer: sliding-window
    and MLA pricing) on a pool small enough to preempt: the core's result is the Python
    loop's and the step-by-step path's."""
    runs = [0]
    real = core.run

    def counting(*a):
        runs[0] += 1
        return real(*a)
    monkeypatch.setattr(core, "run", counting)
    spec, gpu = load_model(model), load_gpu(gpu_id)
    eng = EngineConfig(tensor_parallel_size=tp, max_model_len=8192)
    plan = plan_memory(spec, gpu, eng)
    kw = dict(timer=StepCostModel(spec, gpu, eng), num_blocks=blocks,
              block_size=plan.block_size, kv=kv_shape_from_groups(plan.groups, plan.block_size),
              limits=Limits(max_num_batched_tokens=2048, max_num_seqs=64))
    w = poisson_workload(120, rate=40.0, prompt=(200, 3000), output=(20, 400), seed=7)
    r = simulate(w, **kw)
    assert runs[0] == int(BUILT)
    assert r.total_preemptions > 0 and r.finished.all()
    with python_loop():
        assert_same(r, simulate(w, **kw))
    assert_same(r, simulate(w, fast=False, **kw))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 2, 4, 16]).flatmap(shapes), st.integers(0, 300), st.integers(0, 300))
def test_merged_groups_count_what_the_groups_count(shape, tokens, before) -> None:
    """KvShape.merged (which every path and the core use) against the unmerged groups, one
    group at a time: the same blocks (numpy and plain-int) and logical bytes."""
    b, c = shape.block_size, min(before, tokens)
    t_arr, c_arr = np.array([tokens], dtype=np.int64), np.array([c], dtype=np.int64)
    want = sum(g.weight * int(_group_blocks(g, t_arr, c_arr, b)[0]) for g in shape.groups)
    assert shape.blocks_one(tokens, c) == int(shape.blocks(t_arr, c_arr)[0]) == want
    assert len({(g.kind, g.window) for g in shape.merged}) == len(shape.merged)
    nbytes = sum(g.state_bytes * (tokens > 0) if g.kind == "state" else g.bytes_per_token * (
        min(tokens, g.window) if g.kind == "sliding" else tokens) for g in shape.groups)
    assert int(shape.logical_bytes(t_arr)[0]) == nbytes
