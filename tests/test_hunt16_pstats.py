"""hunt16-pstats: the prefix-cache hit rate counts a preempted request's lookups, as vLLM 0.11.0.

vLLM 0.11.0, vllm/v1/core/kv_cache_manager.py, KVCacheManager.get_computed_blocks: on every
call (the scheduler calls it for each WAITING request it looks at whose
num_computed_tokens == 0: a new request, or a preempted one, whose computed tokens were
reset to 0) it adds ``requests += 1; queries += request.num_tokens; hits +=
num_new_computed_tokens`` to PrefixCacheStats, whether allocate_slots then finds blocks or
not. A preempted request's num_tokens is its prompt + the tokens it generated so far, and
its hits may be its own blocks, still cached. (Recording a preempted request's lookups
apart, preempted_queries / preempted_hits, is vLLM PR 25787, after 0.11.0.) kvplan left a
preempted request's lookups out: in the Python scheduler, the fast paths' blocked-head count
(Scheduler.blocked_lookup gave (0, 0)) and the compiled core.

Each trace below is checked by hand, run on every path (the compiled core, the Python lean
and array fast paths, the general step) and on tests/vllm_v1_reference.py.
"""

from __future__ import annotations

import pytest

from kvplan.analysis.metrics import compute_metrics
from kvplan.sim import core
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload
from tests.vllm_v1_reference import replay

TIMER = LinearTimer(base_s=1.0)


class _NoSums:
    """TIMER without its sum-priced methods: the Python loop takes the array fast path."""

    step_time_s = TIMER.step_time_s
    decode_run_s = TIMER.decode_run_s


@pytest.fixture(params=["core", "lean", "arrays", "general"])
def run(request, monkeypatch):
    """simulate() on one path; the core path checks the compiled core ran (where built)."""
    calls = [0]
    if request.param != "core":
        monkeypatch.setenv(core.ENV, "python")
    real = core.run

    def counting(*a):
        calls[0] += 1
        return real(*a)
    monkeypatch.setattr(core, "run", counting)

    def go(w, **kw):
        timer = _NoSums() if request.param == "arrays" else TIMER
        r = simulate(w, timer=timer, fast=request.param != "general", validate=True, **kw)
        built = core.module() is not None
        assert calls[0] == int(request.param == "core" and built)
        return r
    return go


def test_a_blocked_preempted_request_counts_at_every_lookup_its_own_block_hit_too(run):
    """B = 4, 4 usable blocks (num_blocks 5, vLLM's null block), budget 32, 1 s per step;
    A (prompt 7, output 10) and B (prompt 7, output 6) at t = 0, nothing shared.
    step 0: A 7 + B 7 tokens, 2 blocks each (pool full); lookups 7 + 7, hits 0.
    step 1: both compute their 8th token (2 blocks each).
    step 2: A's 9th token needs a 3rd block: B (newest) is preempted; its 2 full blocks are
            cached, freed in reverse order (2nd block at the free queue's head): A's new
            block evicts B's 2nd block, its 1st stays cached. No WAITING lookup (preempted).
    steps 3-5: B (7 + 2 = 9 tokens) is looked up: limit (9 - 1) // 4 = 2 blocks, its 1st
            cached: hits 4; it needs cdiv(9, 4) - 1 = 2 blocks + its own 1 > 1 free:
            blocked. 3 x (9 queried, 4 hit).
    step 6: A's 13th token takes the last free block, evicting B's 1st: B's lookup hits 0,
            blocked (3 > 0 free). Steps 6-9: 4 x (9, 0); A finishes at step 9 (10 tokens).
    step 10: A's 4 blocks are free: B is looked up (9, 0) and admitted, recomputing 9.
    queries 7 + 7 + 7 x 9 + 9 = 86, hits 3 x 4 = 12: rate 12 / 86 (0 / 14 before)."""
    w = workload([0.0, 0.0], [7, 7], [10, 6])
    r = run(w, num_blocks=5, block_size=4, limits=Limits(max_num_batched_tokens=32,
                                                         max_num_seqs=4))
    assert r.preemptions.tolist() == [0, 1] and r.preemption_s.tolist() == [2.0]
    assert r.steps.new_tokens.tolist() == [14, 2, 1, 1, 1, 1, 1, 1, 1, 1, 9, 1, 1, 1]
    assert r.steps.used_blocks.tolist() == [4, 4, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 3, 3]
    assert r.steps.waiting.tolist() == [0, 0] + [1] * 8 + [0] * 4
    assert r.first_token_s.tolist() == [1.0, 1.0] and r.finish_s.tolist() == [10.0, 14.0]
    assert (r.prefix_query_tokens, r.prefix_lookup_hits) == (86, 12)
    assert r.prefix_hit_tokens.tolist() == [0, 0]  # vLLM's num_cached_tokens: set once
    assert compute_metrics(r).prefix_cache_hit_rate == 12 / 86
    steps, reqs, stats = replay([0.0, 0.0], [7, 7], [10, 6], [None, None], [0, 0],
                                num_blocks=5, b=4, budget=32, seqs=4, chunked=True,
                                caching=True, threshold=0)
    assert stats == (86, 12) and [t for t, _ in steps] == r.steps.new_tokens.tolist()
    assert [q.finish for q in reqs] == r.finish_s.tolist()


def test_a_preempted_head_blocked_through_a_decode_run_counts_each_steps_lookup(run):
    """B = 4, 8 usable blocks, budget 19; A (prompt 16, output 17) and B (prompt 24, output
    2) share an 8-token prefix (2 blocks).
    step 0: A: 16 tokens, 4 blocks (queried 16, hit 0; its 2 prefix blocks cached now);
            B: hits A's 2 prefix blocks (queried 24, hit 8), 3 tokens left of the budget:
            1 block. 5 blocks used.
    step 1: A's 17th token takes a 5th block (2 free left); B's next 13 tokens need 3 more:
            B, the newest, preempts itself. Its partial block is freed (3 free); its prefix
            blocks stay held by A; it has no full block of its own.
    steps 2-16: A decodes alone (tokens 18..32: blocks 6, 7, 8 at its 21st, 25th, 29th),
            finishing at step 16. B (24 tokens, no output yet) is looked up at each step:
            hits A's 2 prefix blocks (8), needs cdiv(24, 4) - 2 = 4 blocks, more than the 3,
            2, 1, 0 free: blocked. 15 x (24 queried, 8 hit); the fast paths run these steps
            as decode runs and count each step's lookup.
    step 17: A's 8 blocks are free: B is looked up (24, 8) and admitted: 16 tokens.
    queries 16 + 24 + 15 x 24 + 24 = 424, hits 8 + 15 x 8 + 8 = 136: rate 136 / 424
    (8 / 40 = 0.2 before)."""
    w = workload([0.0, 0.0], [16, 24], [17, 2])
    r = run(w, num_blocks=9, block_size=4, shared_prefix_tokens=8,
            limits=Limits(max_num_batched_tokens=19, max_num_seqs=4))
    assert r.preemptions.tolist() == [0, 1] and r.preemption_s.tolist() == [1.0]
    assert r.steps.new_tokens.tolist() == [19] + [1] * 16 + [16, 1]
    assert r.steps.used_blocks.tolist() == [5] * 5 + [6] * 4 + [7] * 4 + [8] * 4 + [6, 7]
    assert r.steps.waiting.tolist() == [0] + [1] * 16 + [0, 0]
    assert r.first_token_s.tolist() == [1.0, 18.0] and r.finish_s.tolist() == [17.0, 19.0]
    assert (r.prefix_query_tokens, r.prefix_lookup_hits) == (424, 136)
    assert r.prefix_hit_tokens.tolist() == [0, 8]  # first admission's hits
    assert compute_metrics(r).prefix_cache_hit_rate == 136 / 424
    steps, reqs, stats = replay([0.0, 0.0], [16, 24], [17, 2], [0, 0], [8, 8],
                                num_blocks=9, b=4, budget=19, seqs=4, chunked=True,
                                caching=True, threshold=0)
    assert stats == (424, 136) and [t for t, _ in steps] == r.steps.new_tokens.tolist()
    assert [q.finish for q in reqs] == r.finish_s.tolist()
