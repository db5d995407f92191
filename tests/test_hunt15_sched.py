"""Hunt 15, the serving simulator against vLLM 0.11.0's v1 scheduler: every copy of a cached
block stays cached (block_pool.BlockHashToBlockMap: no de-duplication; get_one_block returns
the first copy cached that is still there; an eviction drops that copy only). Each case runs
on the compiled core (where built) and the Python loop."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload
from tests.test_hunt13_sched import _compare, _random_case
from tests.test_sim_scheduler import run, tokens
from tests.vllm_v1_reference import replay


@pytest.fixture(params=["core", "python"])
def loop(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    return request.param


def test_a_request_hits_the_second_copy_of_a_block_after_the_first_was_evicted(loop):
    # B = 2, 4 usable blocks. X (prompt 4 = blocks 10, 11; output 2) at 0, Y (the same prompt;
    # output 2) at 0.5, W (prompt 2, own content; output 1) at 2.5, Z (prompt 6: 10, 11, then
    # its own block; output 1) at 3.5.
    # Step 0: X computes 4 tokens, caches X10, X11.
    # Step 1: X decodes (takes Xb2); Y hits 10 only (never its last prompt token: (4-1)//2 =
    #   1 block) and computes tokens 2-3 in a new block: a second copy of 11 (Y11), cached
    #   too. X finishes: free queue [Xb2, X11] (10 is Y's now).
    # Step 2: Y decodes, takes Xb2, finishes: queue [X11, Yb2, Y11, X10] (tail first).
    # Step 3: W takes the head X11 (evicting that copy; Y11 stays cached), finishes.
    # Step 4: Z hits X10 and Y11 (2 blocks: 4 tokens) and computes 2. Before: the second
    #   copy was freed without content, Z hit 10 only and computed 4 ([4, 3, 1, 2, 4]).
    w = workload([0, 0.5, 2.5, 3.5], [4, 4, 2, 6], [2, 2, 1, 1],
                 hashes=[[10, 11], [10, 11], [], [10, 11]], hash_tokens=2)
    r = run(w, blocks=5, b=2)
    assert r.steps.new_tokens.tolist() == [4, 3, 1, 2, 2]
    assert r.steps.used_blocks.tolist() == [2, 4, 3, 1, 3]
    assert r.prefix_hit_tokens.tolist() == [0, 2, 0, 4]
    assert [tokens(r, i) for i in range(4)] == [[1.0, 2.0], [2.0, 3.0], [4.0], [5.0]]


# The seeds of test_hunt13_sched._random_case, 0-1999, whose traces differed while kvplan
# freed a second copy without content: 18 of 2,000 (none differ now).
_SECOND_COPY_SEEDS = [124, 162, 332, 377, 479, 569, 686, 958, 969, 971, 1093, 1252, 1392,
                      1447, 1495, 1506, 1579, 1888]


@pytest.mark.parametrize("fast", [True, False])
def test_random_workloads_that_hit_a_second_copy_match_vllm(loop, fast):
    for seed in _SECOND_COPY_SEEDS:
        _compare(*_random_case(seed), fast)


@st.composite
def _shared_prefix_cases(draw):
    """Workloads built to compute shared blocks twice: one prefix for most requests, prompts
    ending at or just past it (the last prompt token is never hit), tight pools, arrivals
    inside steps, preemption, chunked prefill on or off."""
    b = draw(st.sampled_from([2, 3, 4]))
    n = draw(st.integers(2, 8))
    lead = draw(st.integers(1, 4)) * b
    prompts = draw(st.lists(st.integers(1, lead + 2 * b), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 10), min_size=n, max_size=n))
    shares = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    shared = [min(lead, p // b * b) if s else 0 for s, p in zip(shares, prompts, strict=True)]
    low = min([s for s in shared if s], default=0)
    shared = [low if s else 0 for s in shared]
    groups = [0 if s else None for s in shared]
    chunked = draw(st.booleans())
    peak = max(-(-(p + o - 1) // b) for p, o in zip(prompts, outputs, strict=True))
    budget = draw(st.integers(max(n, 4), 24))
    if not chunked:
        budget = max([budget] + [p + o for p, o in zip(prompts, outputs, strict=True)])
    engine = dict(num_blocks=peak + 1 + draw(st.integers(0, 2 * n)), b=b, budget=budget,
                  seqs=draw(st.integers(1, n + 1)), chunked=chunked, caching=True,
                  threshold=draw(st.sampled_from([0, 0, 3])) if chunked else 0)
    arrivals = sorted(draw(st.lists(st.sampled_from([0, 0.5, 1, 1.5, 2, 3.5, 5, 8]),
                                    min_size=n, max_size=n)))
    return dict(arrivals=arrivals, prompts=prompts, outputs=outputs, groups=groups,
                shared=shared), engine


@settings(max_examples=300, deadline=None)
@given(_shared_prefix_cases(), st.sampled_from(["core", "python", "step by step"]))
def test_shared_prefix_workloads_match_an_independent_model_of_vllm(case, path):
    # the compiled core, the Python fast path, the step-by-step loop
    had = os.environ.get("KVPLAN_SIM_CORE")
    os.environ["KVPLAN_SIM_CORE"] = "python" if path == "python" else ""
    try:
        _compare(*case, path != "step by step")
    finally:
        if had is None:
            del os.environ["KVPLAN_SIM_CORE"]
        else:
            os.environ["KVPLAN_SIM_CORE"] = had


def test_a_decode_run_gives_back_the_blocks_of_two_windows_of_one_residue(loop):
    # One request, prompt 2, output 12, B = 2, two sliding groups (windows 8 and 4, in that
    # order), 49 usable blocks. vLLM holds per group cdiv(t, 2) - max(c - W + 1, 0) // 2
    # after a step from c to t computed tokens (remove_skipped_blocks on c): steps 0-11,
    # c = 0, 2, 3, ..., 12: W=8: 1 2 2 3 3 4 4 5 4 5 4 5, W=4: 1 2 2 3 2 3 2 3 2 3 2 3.
    # The compiled core's decode run walked W=4's give-backs (from step 4, every 2 steps)
    # only from W=8's first (step 8), since 8 = 4 mod 2: two blocks were never given back
    # ([2, 4, 4, 6, 6, 8, 8, 10, 8, 10, 8, 10]).
    shape = KvShape(block_size=2, groups=(CacheGroup(kind="sliding", window=8),
                                          CacheGroup(kind="sliding", window=4)))
    r = simulate(workload([0], [2], [12]), timer=LinearTimer(base_s=1.0), num_blocks=50,
                 block_size=2, kv=shape, limits=Limits(max_num_batched_tokens=100,
                                                       max_num_seqs=4), validate=True)
    assert r.steps.used_blocks.tolist() == [2, 4, 4, 6, 5, 7, 6, 8, 6, 8, 6, 8]
    steps, _, _ = replay([0], [2], [12], [None], [0], windows=[8, 4], num_blocks=50, b=2,
                         budget=100, seqs=4, chunked=True, threshold=0)
    assert r.steps.used_blocks.tolist() == [u for _, u in steps]


@st.composite
def _window_cases(draw):
    """Sliding windows (one or two, weights 1-3) with or without a full-attention group."""
    b = draw(st.sampled_from([1, 2, 4]))
    n = draw(st.integers(1, 12))
    groups = [("sliding", draw(st.sampled_from([2, 3, 4, 5, 8, 13])), draw(st.integers(1, 3)))]
    if draw(st.booleans()):
        groups.insert(0, ("full", 0, draw(st.integers(1, 2))))
    if draw(st.booleans()):
        groups.append(("sliding", draw(st.sampled_from([4, 7])), 1))
    prompts = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 25), min_size=n, max_size=n))
    chunked = draw(st.booleans())
    budget = draw(st.integers(max(n, 4), 40))
    if not chunked:
        budget = max([budget] + [p + o for p, o in zip(prompts, outputs, strict=True)])
    lim = Limits(max_num_batched_tokens=budget, max_num_seqs=draw(st.integers(1, n + 1)),
                 chunked_prefill=chunked,
                 long_prefill_token_threshold=draw(st.sampled_from([0, 3])) if chunked else 0)
    arrivals = sorted(draw(st.lists(st.sampled_from([0, 0.5, 1, 3, 6]), min_size=n,
                                    max_size=n)))
    shape = KvShape(block_size=b, groups=tuple(CacheGroup(kind=k, window=w, weight=m)
                                               for k, w, m in groups))
    return arrivals, prompts, outputs, shape, lim, draw(st.integers(0, 3 * n))


@settings(max_examples=200, deadline=None)
@given(_window_cases(), st.booleans())
def test_sliding_window_workloads_match_an_independent_model_of_vllm(case, fast):
    # every step's tokens and blocks in use, every request's times and preemptions equal
    # tests/vllm_v1_reference.py's WindowEngine (fast: the compiled core where built)
    import numpy as np

    from kvplan.sim.rejects import solo_peak_blocks

    arrivals, prompts, outputs, shape, lim, spare = case
    total = np.array(prompts) + np.array(outputs)
    num_blocks = int(solo_peak_blocks(np.array(prompts), total, shape, lim).max()) + 1 + spare
    windows = [g.window if g.kind == "sliding" else 0 for g in shape.groups
               for _ in range(g.weight)]
    n = len(prompts)
    steps, reqs, _ = replay(arrivals, prompts, outputs, [None] * n, [0] * n, windows=windows,
                            num_blocks=num_blocks, b=shape.block_size,
                            budget=lim.max_num_batched_tokens, seqs=lim.max_num_seqs,
                            chunked=lim.chunked_prefill,
                            threshold=lim.long_prefill_token_threshold)
    r = simulate(workload(arrivals, prompts, outputs), timer=LinearTimer(base_s=1.0),
                 num_blocks=num_blocks, block_size=shape.block_size, kv=shape, limits=lim,
                 fast=fast, validate=True)
    assert not r.rejected
    assert r.steps.new_tokens.tolist() == [t for t, _ in steps]
    assert r.steps.used_blocks.tolist() == [u for _, u in steps]
    assert r.first_token_s.tolist() == [q.first for q in reqs]
    assert r.finish_s.tolist() == [q.finish for q in reqs]
    assert r.preemptions.tolist() == [q.preemptions for q in reqs]
