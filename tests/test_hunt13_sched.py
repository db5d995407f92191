"""Hunt 13, the serving simulator against vLLM 0.11.0's v1 scheduler (exact step traces by
hand, 1 s per step; vllm/v1/core/sched/scheduler.py). Each trace runs on the compiled core
(where built), the Python fast path and the step-by-step reference."""

from __future__ import annotations

import pytest

from kvplan.sim.testing import workload
from tests.test_sim_scheduler import run, tokens


@pytest.fixture(params=["core", "python"])
def loop(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    return request.param


def test_chunked_prefill_off_skips_a_prompt_over_the_budget_left(loop):
    # Budget 8, chunked prefill off. Step 0: A (6) leaves 2; vLLM 0.11.0 skips B (5 > 2) and
    # admits C (2): 8 tokens, C's first token at 1.0. Step 1: A and C decode, B's 5 fit the 6
    # left: 7 tokens. Before: B stopped the queue, C waited behind it ([6, 8, 2]).
    r = run(workload([0, 0, 0], [6, 5, 2], [2, 2, 2]), budget=8, chunked=False)
    assert r.steps.new_tokens.tolist() == [8, 7, 1]
    assert tokens(r, 2) == [1.0, 2.0]
    assert tokens(r, 1) == [2.0, 3.0]


def test_chunked_prefill_off_skipped_requests_go_back_in_reverse_order(loop):
    # Step 0: A (6) leaves 2: B (5) and C (4) skipped, D (2) admitted. vLLM 0.11.0 prepends
    # the skipped queue reversed (FCFSRequestQueue.prepend_requests), so WAITING is C, B.
    # Step 1: A + D decode (2), C's 4 fit the 6 left, B's 5 not: 6 tokens. Step 2: C decodes,
    # B prefills: 6. Step 3: B decodes.
    r = run(workload([0, 0, 0, 0], [6, 5, 4, 2], [2, 2, 2, 2]), budget=8, chunked=False)
    assert r.steps.new_tokens.tolist() == [8, 6, 6, 1]
    assert [tokens(r, i) for i in range(4)] == [[1.0, 2.0], [3.0, 4.0], [2.0, 3.0],
                                                 [1.0, 2.0]]


def test_max_concurrent_requests_counts_requests_in_flight_in_the_same_second(loop):
    # vllm bench serve's calculate_metrics counts each completed request in every one-second
    # bucket int(t - first send) from its send to its answer, and reports the fullest bucket.
    # Three requests (prompt 2, output 1, one 0.1 s step each) sent at 0, 0.3 and 0.6 s are
    # never in flight together, but all three fall in bucket 0: 3 (before: 1, the peak of
    # requests in flight at one instant). A fourth sent at 1.5 s is alone in bucket 1.
    from kvplan.analysis.metrics import compute_metrics
    from kvplan.sim.testing import LinearTimer

    r = run(workload([0, 0.3, 0.6, 1.5], [2, 2, 2, 2], [1, 1, 1, 1]),
            timer=LinearTimer(base_s=0.1))
    assert r.finish_s.tolist() == pytest.approx([0.1, 0.4, 0.7, 1.6])
    assert compute_metrics(r).max_concurrent_requests == 3


def test_preempted_blocks_are_freed_tail_first_duplicates_in_place(loop):
    # B = 2, 6 usable blocks, X (prompt 5, output 5) and Y (prompt 4, output 5, at 0.5 s)
    # share their first two blocks. Step 1: Y hits block 0 only (never its last prompt
    # token) and computes block 1 again: a duplicate of X's cached block. Steps 2-3: Y's
    # block 2 fills with its own tokens 4-5. Step 4: X needs a block, none free: Y (newest)
    # is preempted. vLLM frees in reverse block order, so the free queue holds Y's own
    # block 2, then the duplicate 1; X's allocation takes the head and evicts block 2. X
    # finishes. Step 5: Y (7 tokens) hits blocks 0-1 (X's, freed) but not 2: it recomputes
    # 3 tokens. Before: the duplicate was queued first and evicted, Y hit its block 2 and
    # recomputed 1 token ([5, 3, 2, 2, 1, 1, 1]).
    w = workload([0, 0.5], [5, 4], [5, 5], hashes=[[10, 11], [10, 11]], hash_tokens=2)
    r = run(w, blocks=7, b=2)
    assert r.steps.new_tokens.tolist() == [5, 3, 2, 2, 1, 3, 1]
    assert r.steps.used_blocks.tolist() == [3, 4, 6, 6, 5, 4, 4]
    assert r.preemptions.tolist() == [0, 1] and r.prefix_hit_tokens.tolist() == [0, 2]
    assert tokens(r, 1) == [2.0, 3.0, 4.0, 6.0, 7.0]
