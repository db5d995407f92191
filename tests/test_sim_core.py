"""The compiled core (kvplan.sim._core) against the pure-Python loop: built where expected,
chosen only for the shape it covers, the same results to the bit, and the fallback."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.sums import longest_chunk
from kvplan.sim import core
from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import ArrayWorkload, LinearTimer, poisson_workload, workload
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.core_helpers import assert_same, python_loop
from tests.test_api_delay import ApiTimer

TIMER = LinearTimer(base_s=0.01, per_token_s=1e-4, per_context_s=1e-6)
BUILT = core.module() is not None


def test_the_core_is_built_where_it_is_expected() -> None:
    """scripts/test.sh sets KVPLAN_REQUIRE_CORE=1: a missing build fails, never skips."""
    if os.environ.get("KVPLAN_REQUIRE_CORE") == "1":
        assert BUILT, "the compiled core (kvplan.sim._core) did not build; see setup.py"


def test_a_stale_build_is_not_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension built from an older _core.c (another ABI, or none) is left alone: the
    run takes the Python loop instead of calling core_run with arguments it does not take."""
    import importlib
    import types

    stale = types.ModuleType("kvplan.sim._core")
    monkeypatch.setattr(importlib, "import_module", lambda name: stale)
    assert core.module() is None
    stale.ABI = core.CORE_ABI - 1  # type: ignore[attr-defined]
    assert core.module() is None
    stale.ABI = core.CORE_ABI  # type: ignore[attr-defined]
    assert core.module() is stale


@pytest.fixture
def core_runs(monkeypatch):
    """How many simulate() calls went to the compiled core."""
    count = [0]
    real = core.run

    def counting(*a):
        count[0] += 1
        return real(*a)
    monkeypatch.setattr(core, "run", counting)
    return count


# ------------------------------------------------------------ the step-time form

MODELS = [("meta-llama/Llama-2-7b-hf", 1, 1), ("meta-llama/Llama-2-7b-hf", 8, 1),
          ("meta-llama/Llama-2-7b-hf", 2, 2), ("Qwen/Qwen3-30B-A3B", 4, 1),
          ("deepseek-ai/DeepSeek-V2-Lite", 1, 1), ("deepseek-ai/DeepSeek-V3", 8, 1),
          ("google/gemma-2-9b-it", 1, 1), ("google/gemma-3-27b-it", 2, 1),
          ("openai/gpt-oss-120b", 1, 1), ("Qwen/Qwen3-Next-80B-A3B-Thinking", 4, 1)]


# async scheduling with pp > 1 is refused, as vLLM 0.11 refuses it: pp models run sync only
FORMS = [(*m, overlap) for m in MODELS for overlap in (False, True) if not (overlap and m[2] > 1)]


@pytest.mark.parametrize(("model", "tp", "pp", "overlap"), FORMS)
def test_the_form_equals_step_time_agg_to_the_bit(model: str, tp: int, pp: int,
                                                  overlap: bool) -> None:
    """Sync and async scheduling (--async-scheduling: the host's work overlaps the stage)."""
    t = StepCostModel(load_model(model), load_gpu("H100"),
                      EngineConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp,
                                   async_scheduling=overlap))
    form = t.aggregate_form(2048)
    assert form is not None and (form.allreduce is not None) == (tp > 1)
    assert form.overlap_host == overlap
    assert (form.p2p is not None) == (pp > 1)
    assert form.mla == bool(t.constants.mla_prefill_pair_delta)
    rng = np.random.default_rng(tp * 10 + pp)
    batches = []
    for _ in range(300):
        k = int(rng.integers(1, 40))
        new = np.where(rng.random(k) < 0.7, 1, rng.integers(1, 2048 // k + 1, k))
        ctx = np.where(rng.random(k) < 0.1, 0, rng.integers(0, 200_000, k))
        batches.append((new.astype(np.int64), ctx.astype(np.int64)))
    want = [t.step_time_s(n, c) for n, c in batches]
    if t.supports_aggregates:  # the lean path's sums give the same times (GDN: + longest)
        assert want == [t.step_time_agg(int(n.sum()), len(n), int(c.sum()),
                                        int(n @ c) + int(n @ (n + 1)) // 2,
                                        bool((n > 1).any() or (c == 0).any()),
                                        longest_chunk(n) if t.needs_longest else 0)
                        for n, c in batches]
    assert t.needs_longest == (model == "Qwen/Qwen3-Next-80B-A3B-Thinking")
    if BUILT:
        assert np.array_equal(eval_steps(form, batches), np.array(want))
    assert BUILT or os.environ.get("KVPLAN_REQUIRE_CORE") != "1"


def eval_steps(form, batches) -> np.ndarray:
    """The core's step time of each (new, ctx) batch."""
    new = np.concatenate([n for n, _ in batches]).astype(np.int64)
    ctx = np.concatenate([c for _, c in batches]).astype(np.int64)
    off = np.cumsum([0] + [len(n) for n, _ in batches]).astype(np.int64)
    out = np.zeros(len(batches))
    core.module().eval_steps(form.as_tuple(), new, ctx, off, out)
    return out


def test_a_timer_whose_form_disagrees_is_not_run_in_c(core_runs) -> None:
    class Drifted(LinearTimer):
        def step_time_agg(self, tokens, requests, context, pairs, prefill):
            return super().step_time_agg(tokens, requests, context, pairs, prefill) * 1.0001

    w = poisson_workload(30, rate=50.0, prompt=(5, 40), output=(2, 20), seed=3)
    lim = Limits(max_num_batched_tokens=64, max_num_seqs=8)
    simulate(w, timer=Drifted(base_s=0.01, per_token_s=1e-4), num_blocks=200, block_size=4,
             limits=lim)
    assert core_runs[0] == 0
    simulate(w, timer=TIMER, num_blocks=200, block_size=4, limits=lim)
    assert core_runs[0] == int(BUILT)


# ------------------------------------------------------------ an exact step trace

def test_shared_prefix_blocks_are_hit_in_the_core(core_runs) -> None:
    """B = 4, 8 shared tokens: A computes blocks S0 S1 and caches them; B, sent after A
    finished, hits both (8 tokens) and computes only its last 2 prompt tokens."""
    w = workload([0.0, 10.0], [10, 10], [2, 2])
    kw = dict(timer=LinearTimer(base_s=1.0), num_blocks=20, block_size=4,
              limits=Limits(max_num_batched_tokens=64, max_num_seqs=4), shared_prefix_tokens=8,
              validate=True)
    r = simulate(w, **kw)
    assert core_runs[0] == int(BUILT)
    assert r.prefix_hit_tokens.tolist() == [0, 8]
    assert r.steps.new_tokens.tolist() == [10, 1, 2, 1]
    assert r.steps.used_blocks.tolist() == [3, 3, 3, 3]
    assert r.prefix_query_tokens == 20
    with python_loop():
        assert_same(r, simulate(w, **kw))


def test_exact_step_trace_with_a_preemption_and_an_own_block_hit(core_runs) -> None:
    """B = 4, 4 usable blocks, budget 8, 1 s per step. Step 0 admits A (6 tokens, 2 blocks)
    and B's first 2 tokens (1 block); step 1 finishes B's prompt (its 2nd block: pool full);
    step 3: A needs a 3rd block, B (newest) is preempted: its 1 full block stays cached as
    its own, its partial one is freed. A finishes at step 3. Step 4 readmits B with 4 tokens
    hit (its own block; limit (8 - 1) // 4 = 1 block) and 4 to recompute."""
    w = workload([0.0, 0.0], [6, 6], [4, 4])
    kv = KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=10),))
    kw = dict(timer=LinearTimer(base_s=1.0), num_blocks=5, block_size=4, kv=kv,
              limits=Limits(max_num_batched_tokens=8, max_num_seqs=4), validate=True)
    r = simulate(w, **kw)
    assert core_runs[0] == int(BUILT)
    s = r.steps
    assert s.start_s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert s.end_s.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert s.used_blocks.tolist() == [3, 4, 4, 3, 2, 3]
    assert s.logical_bytes.tolist() == [80, 130, 150, 90, 80, 90]
    assert s.running.tolist() == [2, 2, 2, 1, 1, 1]
    assert s.waiting.tolist() == [0, 0, 0, 1, 0, 0]
    assert s.new_tokens.tolist() == [8, 5, 2, 1, 4, 1]
    assert r.first_token_s.tolist() == [1.0, 2.0] and r.finish_s.tolist() == [4.0, 6.0]
    assert r.preemptions.tolist() == [0, 1] and r.preemption_s.tolist() == [3.0]
    # prefix_hit_tokens is the first admission's hits (vLLM's num_cached_tokens, set once);
    # vLLM 0.11.0's PrefixCacheStats counts every lookup: 6 + 6 + B's readmission's 8, hits 4
    assert r.prefix_hit_tokens.tolist() == [0, 0] and r.prefix_lookup_hits == 4
    assert r.token_times(0).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert r.token_times(1).tolist() == [2.0, 3.0, 5.0, 6.0]
    assert (r.prefill_claimed_blocks, r.decode_claimed_blocks, r.prefix_query_tokens) == (5, 2, 20)
    with python_loop():
        assert_same(r, simulate(w, **kw))


# ------------------------------------------------------------ properties: core == Python

@st.composite
def core_cases(draw):
    """Bursts and quiet gaps, tight pools (preemption), closed loop, rejections, prefix
    hashes (a few distinct values: requests share prefixes) or a shared prefix."""
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.001, 0.05, 0.3, 2.0]), min_size=n,
                         max_size=n))
    w = ArrayWorkload(
        arrival_s=np.cumsum(gaps),
        prompt_tokens=np.array(draw(st.lists(st.integers(0, 90) | st.integers(1, 12), min_size=n,
                                               max_size=n))),
        output_tokens=np.array(draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))),
        closed_loop_concurrency=draw(st.none() | st.integers(1, 6)), hash_block_tokens=4,
        prefix_hashes=(tuple(np.array(draw(st.lists(st.integers(0, 3), min_size=1, max_size=6)))
                             for _ in range(n)) if draw(st.booleans()) else None))
    lim = Limits(max_num_batched_tokens=draw(st.integers(1, 128)),
                 max_num_seqs=draw(st.integers(1, 10)), chunked_prefill=draw(st.booleans()),
                 prefix_caching=draw(st.booleans()))
    b = draw(st.sampled_from([1, 2, 4, 16]))
    # a pool just above the largest request's peak, so that several together preempt
    peak = int(((w.prompt_tokens + w.output_tokens - 1 + b - 1) // b).max())
    # (at least 2: one is vLLM's null block; all-empty prompts have peak 0)
    cfg = dict(num_blocks=max(2, peak + 1 + draw(st.integers(0, 2 * peak))) if draw(st.booleans())
               else draw(st.integers(2, 400)), block_size=b, limits=lim,
               kv=KvShape(block_size=b, groups=(CacheGroup(bytes_per_token=7),)),
               max_model_len=draw(st.none() | st.integers(20, 300)),
               shared_prefix_tokens=draw(st.sampled_from([0, 0, 8, 33])))
    return w, cfg


@settings(max_examples=250, deadline=None)
@given(core_cases(), st.sampled_from([TIMER, LinearTimer(base_s=0.003, per_context_s=3e-7),
                                      ApiTimer(base_s=0.01, per_token_s=1e-4, api_s=0.02,
                                               api_token_s=3e-3),
                                      ApiTimer(base_s=0.01, per_token_s=1e-4, api_s=0.02,
                                               admit_s=0.015)]))
def test_core_equals_the_python_loop_and_the_step_by_step_path(case, timer):
    w, cfg = case
    got = simulate(w, timer=timer, validate=True, **cfg)
    with python_loop():
        lean = simulate(w, timer=timer, validate=True, **cfg)
    assert_same(got, lean)
    assert_same(got, simulate(w, timer=timer, fast=False, **cfg))


def test_the_roofline_timer_runs_in_the_core_with_preemptions(core_runs) -> None:
    m, gpu = load_model("meta-llama/Llama-2-7b-hf"), load_gpu("H100")
    timer = StepCostModel(m, gpu, EngineConfig(tensor_parallel_size=2))
    w = poisson_workload(400, rate=40.0, prompt=(100, 900), output=(20, 300), seed=5)
    kw = dict(timer=timer, num_blocks=600, block_size=16,
              limits=Limits(max_num_batched_tokens=512, max_num_seqs=64))
    r = simulate(w, **kw)
    assert core_runs[0] == int(BUILT)
    assert r.total_preemptions > 0 and r.finished.all()
    with python_loop():
        assert_same(r, simulate(w, **kw))


def test_async_scheduling_runs_in_the_core(core_runs) -> None:
    """--async-scheduling ran the Python loops (its overlap was not in the form); the core
    now runs it, to the bit of the Python loop, and its steps are never slower than sync."""
    m, gpu = load_model("meta-llama/Llama-2-7b-hf"), load_gpu("H100")
    w = poisson_workload(300, rate=40.0, prompt=(100, 900), output=(20, 300), seed=7)
    lim = Limits(max_num_batched_tokens=512, max_num_seqs=64)
    runs = {}
    for overlap in (False, True):
        timer = StepCostModel(m, gpu, EngineConfig(async_scheduling=overlap))
        kw = dict(timer=timer, num_blocks=2000, block_size=16, limits=lim)
        runs[overlap] = simulate(w, **kw)
        with python_loop():
            assert_same(runs[overlap], simulate(w, **kw))
    assert core_runs[0] == 2 * int(BUILT)
    assert runs[True].steps.end_s[-1] < runs[False].steps.end_s[-1]


def test_every_kv_layout_runs_in_the_core_and_fast_false_in_python(core_runs) -> None:
    w = poisson_workload(20, rate=30.0, prompt=(20, 60), output=(3, 9), seed=1)
    lim = Limits(max_num_batched_tokens=64, max_num_seqs=8)
    base = dict(timer=TIMER, num_blocks=100, block_size=4)
    simulate(w, **base, limits=lim, fast=False)
    assert core_runs[0] == 0
    simulate(w, **base, limits=Limits(max_num_batched_tokens=64, max_num_seqs=8,
                                      long_prefill_token_threshold=5))
    two = KvShape(block_size=4, groups=(CacheGroup(), CacheGroup(kind="sliding", window=8)))
    simulate(w, **base, limits=lim, kv=two)
    hybrid = KvShape(block_size=4, groups=(CacheGroup(), CacheGroup(kind="state",
                                                                    state_bytes=99)))
    simulate(w, **base, limits=lim, kv=hybrid)
    assert core_runs[0] == 3 * int(BUILT)


# ------------------------------------------------------------ selection and fallback

def test_kvplan_sim_core_python_forces_the_python_loop(core_runs, monkeypatch) -> None:
    w = poisson_workload(20, rate=30.0, prompt=(20, 60), output=(3, 9), seed=1)
    kw = dict(timer=TIMER, num_blocks=100, block_size=4,
              limits=Limits(max_num_batched_tokens=64, max_num_seqs=8))
    monkeypatch.setenv(core.ENV, "python")
    simulate(w, **kw)
    assert core_runs[0] == 0 and core.module() is None


def test_without_the_extension_the_python_loop_runs(core_runs, monkeypatch) -> None:
    """No compiler at install time = no kvplan.sim._core: importing it fails (simulated)."""
    w = poisson_workload(60, rate=30.0, prompt=(20, 60), output=(3, 30), seed=2)
    kw = dict(timer=TIMER, num_blocks=60, block_size=4,
              limits=Limits(max_num_batched_tokens=64, max_num_seqs=8))
    with_core = simulate(w, **kw)
    monkeypatch.setitem(sys.modules, "kvplan.sim._core", None)  # import raises ImportError
    assert core.module() is None
    before = core_runs[0]
    without = simulate(w, **kw)
    assert core_runs[0] == before
    assert_same(with_core, without)


def test_an_exception_from_progress_stops_the_core(core_runs) -> None:
    """The web page cancels a run by raising from its progress callback."""
    class Cancelled(Exception):
        pass

    def cancel(done: int, total: int) -> None:
        raise Cancelled

    w = poisson_workload(40, rate=1000.0, prompt=(10, 20), output=(1000, 2000), seed=1)
    with pytest.raises(Cancelled):
        simulate(w, timer=LinearTimer(base_s=0.01), num_blocks=6000, block_size=16,
                 limits=Limits(max_num_batched_tokens=256, max_num_seqs=64), progress=cancel)
    assert core_runs[0] == int(BUILT)


@pytest.mark.skipif(not BUILT, reason="no compiled core here (no C compiler): nothing to compare")
@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.floats(0, 2, allow_nan=False), min_size=0, max_size=60),
       service=st.data())
def test_the_cores_fifo_exits_are_the_loops_to_the_bit(gaps: list[float],
                                                       service: st.DataObject) -> None:
    """frontend.fifo_exits in C: S_k = max(sent_k, S_k-1) + service_k, the same bits as the
    Python loop it replaces (KVPLAN_SIM_CORE=python), busy and idle server alike."""
    from kvplan.sim import frontend

    sent = np.cumsum(np.array(gaps, dtype=np.float64))
    s = np.array(service.draw(st.lists(st.floats(0, 1, allow_nan=False), min_size=len(gaps),
                                       max_size=len(gaps))), dtype=np.float64)
    got = frontend.fifo_exits(sent, s)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(core.ENV, "python")
        want = frontend.fifo_exits(sent, s)
    assert got.tobytes() == want.tobytes()
    if len(gaps):
        assert got[0] == sent[0] + s[0]
