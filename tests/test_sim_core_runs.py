"""The core's decode runs (_core_run.h): steps in which every running request decodes one
token and nothing else can happen, stepped at O(1) each. An exact trace by hand, then the
Python loop to the bit on long decodes, block sizes that are and are not powers of two, tight
pools, closed loops and prefix caching."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim import core
from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import ArrayWorkload, LinearTimer, workload
from tests.core_helpers import assert_same, python_loop

pytestmark = pytest.mark.skipif(core.module() is None, reason="the compiled core is not built")


def _run_steps(w: ArrayWorkload, **kw: object) -> tuple[object, int]:
    before = core.DECODE_RUN_STEPS[0]
    r = simulate(w, **kw)
    return r, core.DECODE_RUN_STEPS[0] - before


@pytest.mark.parametrize("block_size", [4, 3])
def test_a_decode_run_by_hand(block_size: int) -> None:
    """Two prompts of 3 tokens, 6 output tokens each, 1 s a step, 7 bytes a token. Step 0
    prefills both (first tokens at 1 s). Steps 1-5 are a decode run: each request starts it
    at 3 computed tokens with 1 token generated; both finish at its last step (6 generated,
    6 s). Step j computes each request's token j + 3 (0-based). B = 4: token 4 (step 2)
    opens each request's second block, so used blocks 2, 2, 4, 4, 4, 4; B = 3: tokens 3 and 6
    (steps 1 and 4): 2, 4, 4, 4, 6, 6. Logical bytes: 2 requests x computed tokens x 7."""
    w = workload([0.0, 0.0], [3, 3], [6, 6])
    kw = dict(timer=LinearTimer(base_s=1.0), num_blocks=12, block_size=block_size,
              kv=KvShape(block_size=block_size, groups=(CacheGroup(bytes_per_token=7),)),
              limits=Limits(max_num_batched_tokens=8, max_num_seqs=4), validate=True)
    r, ran = _run_steps(w, **kw)
    s = r.steps
    assert ran == 5
    assert s.end_s.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert s.new_tokens.tolist() == [6, 2, 2, 2, 2, 2]
    assert s.used_blocks.tolist() == ([2, 2, 4, 4, 4, 4] if block_size == 4 else
                                      [2, 4, 4, 4, 6, 6])
    assert s.logical_bytes.tolist() == [42, 56, 70, 84, 98, 112]
    assert r.first_token_s.tolist() == [1.0, 1.0] and r.finish_s.tolist() == [6.0, 6.0]
    assert r.token_times(0).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert (r.prefill_claimed_blocks, r.decode_claimed_blocks) == (
        (2, 2) if block_size == 4 else (2, 4))
    with python_loop():
        assert_same(r, simulate(w, **kw))


def test_an_arrival_ends_a_run_and_is_admitted_on_time() -> None:
    """A decodes alone from step 1; B is due at 3.5 s, so the run stops before the step
    that starts at 4 s, which admits B. Step 5 (B's last token: a run of one step) is a
    general step; A's last two (6, 7) are a run that ends with its finish."""
    w = workload([0.0, 3.5], [3, 3], [8, 2])
    kw = dict(timer=LinearTimer(base_s=1.0), num_blocks=12, block_size=4,
              limits=Limits(max_num_batched_tokens=8, max_num_seqs=4))
    r, ran = _run_steps(w, **kw)
    assert ran == 5  # steps 1, 2, 3, then 6, 7
    assert r.steps.new_tokens.tolist()[:6] == [3, 1, 1, 1, 4, 2]
    assert r.first_token_s.tolist() == [1.0, 5.0] and r.finish_s.tolist() == [8.0, 6.0]
    with python_loop():
        assert_same(r, simulate(w, **kw))


@st.composite
def long_decodes(draw):
    """Few arrivals, long outputs: long runs, cut by arrivals, finishes and full pools."""
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.01, 0.2, 1.0, 5.0]), min_size=n, max_size=n))
    w = ArrayWorkload(
        arrival_s=np.cumsum(gaps),
        prompt_tokens=np.array(draw(st.lists(st.integers(0, 70), min_size=n, max_size=n))),
        output_tokens=np.array(draw(st.lists(st.integers(1, 600), min_size=n, max_size=n))),
        closed_loop_concurrency=draw(st.none() | st.integers(1, 4)), hash_block_tokens=4,
        prefix_hashes=(tuple(np.array(draw(st.lists(st.integers(0, 2), min_size=1, max_size=4)))
                             for _ in range(n)) if draw(st.booleans()) else None))
    b = draw(st.sampled_from([1, 3, 4, 16]))
    lim = Limits(max_num_batched_tokens=draw(st.integers(1, 64)),
                 max_num_seqs=draw(st.integers(1, 8)), chunked_prefill=draw(st.booleans()),
                 prefix_caching=draw(st.booleans()))
    cfg = dict(num_blocks=draw(st.integers(2, 900)), block_size=b, limits=lim,
               kv=KvShape(block_size=b, groups=(CacheGroup(bytes_per_token=5),)),
               shared_prefix_tokens=draw(st.sampled_from([0, 8])))
    return w, cfg


@settings(max_examples=200, deadline=None)
@given(long_decodes(), st.sampled_from([LinearTimer(base_s=0.003, per_context_s=3e-7),
                                        LinearTimer(base_s=0.01, per_token_s=1e-4,
                                                    per_context_s=1e-6)]))
def test_runs_equal_the_python_loop_to_the_bit(case, timer) -> None:
    w, cfg = case
    got = simulate(w, timer=timer, validate=True, **cfg)
    with python_loop():
        assert_same(got, simulate(w, timer=timer, validate=True, **cfg))


def test_progress_is_called_at_the_same_steps_as_without_runs() -> None:
    """A run never crosses a progress report (every 4,096 steps): one long decode of 9,000
    tokens reports at steps 4,096 and 8,192, then the end."""
    w = workload([0.0], [5], [9000])
    seen: list[tuple[int, int]] = []
    r, ran = _run_steps(w, timer=LinearTimer(base_s=0.001), num_blocks=700, block_size=16,
                        limits=Limits(max_num_batched_tokens=64, max_num_seqs=4),
                        progress=lambda d, n: seen.append((d, n)))
    assert ran > 8000 and len(r.steps.end_s) == 9000
    assert seen == [(0, 1), (0, 1), (1, 1)]


@st.composite
def full_and_state(draw):
    """Full groups of several weights and state groups (hybrid models): runs take them;
    a sliding group among them keeps every step general."""
    kinds = draw(st.lists(st.sampled_from(["full", "full", "state", "sliding"]), min_size=1,
                          max_size=4))
    if "full" not in kinds:
        kinds.append("full")
    b = draw(st.sampled_from([2, 4, 5, 16]))
    groups = tuple(CacheGroup(kind=k, window=8 if k == "sliding" else 0,
                              weight=draw(st.integers(1, 3)),
                              bytes_per_token=0 if k == "state" else draw(st.integers(1, 9)),
                              state_bytes=draw(st.integers(1, 500)) if k == "state" else 0)
                   for k in kinds)
    return KvShape(block_size=b, groups=groups)


@settings(max_examples=120, deadline=None)
@given(long_decodes(), full_and_state())
def test_runs_over_full_and_state_groups_equal_the_python_loop(case, shape) -> None:
    w, cfg = case
    cfg = {**cfg, "kv": shape, "block_size": shape.block_size}
    timer = LinearTimer(base_s=0.003, per_context_s=3e-7)
    got = simulate(w, timer=timer, validate=True, **cfg)
    with python_loop():
        assert_same(got, simulate(w, timer=timer, validate=True, **cfg))


def test_hybrid_and_sliding_shapes_run() -> None:
    """Two requests decoding 200 tokens: full (weight 2) + state groups, and the same with a
    sliding group of 8 tokens (its blocks given back as the window moves) run."""
    w = workload([0.0, 0.0], [10, 10], [200, 200])
    hybrid = KvShape(block_size=4, groups=(CacheGroup(weight=2, bytes_per_token=3),
                                           CacheGroup(kind="state", state_bytes=100)))
    sliding = KvShape(block_size=4, groups=(*hybrid.groups,
                                            CacheGroup(kind="sliding", window=8,
                                                       bytes_per_token=3)))
    for kv in (hybrid, sliding):
        kw = dict(timer=LinearTimer(base_s=0.01), num_blocks=600, block_size=4, kv=kv,
                  limits=Limits(max_num_batched_tokens=64, max_num_seqs=4), validate=True)
        r, ran = _run_steps(w, **kw)
        assert ran > 150
        with python_loop():
            assert_same(r, simulate(w, **kw))


@pytest.mark.parametrize("model", ["google/gemma-3-27b-it", "openai/gpt-oss-20b",
                                   "Qwen/Qwen3-Next-80B-A3B-Thinking"])
def test_real_sliding_and_hybrid_models_run_priced_windows_included(model: str) -> None:
    """The measured-kernel timer (its form prices the sliding window's context and pairs)
    on each model's own KV groups: the core's runs equal the Python loop."""
    from kvplan.costs.memory.plan import plan_memory
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.sim.blocks import kv_shape_from_groups
    from kvplan.sim.testing import poisson_workload
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    m, gpu = load_model(model), load_gpu("H200")
    engine = EngineConfig(tensor_parallel_size=4 if "Next" in model else 1,
                          max_model_len=8192)
    plan = plan_memory(m, gpu, engine)
    w = poisson_workload(60, rate=2.0, prompt=(100, 2000), output=(50, 600), seed=3)
    kw = dict(timer=StepCostModel(m, gpu, engine), num_blocks=plan.num_blocks,
              block_size=plan.block_size, kv=kv_shape_from_groups(plan.groups, plan.block_size),
              limits=Limits(max_num_batched_tokens=2048, max_num_seqs=64), validate=True)
    r, ran = _run_steps(w, **kw)
    assert ran > len(r.steps.end_s) // 2
    with python_loop():
        assert_same(r, simulate(w, **kw))
