"""Hunt 13, the serving simulator against vLLM 0.11.0's v1 scheduler (exact step traces by
hand, 1 s per step; vllm/v1/core/sched/scheduler.py). Each trace runs on the compiled core
(where built), the Python fast path and the step-by-step reference."""

from __future__ import annotations

import random

import pytest

from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload
from tests.test_sim_scheduler import run, tokens
from tests.vllm_v1_reference import replay


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


def _random_case(seed: int) -> tuple[dict, dict]:
    """A small random workload: shared prefixes (two groups), tight pools, chunked prefill on
    or off, long-prefill caps, max_num_seqs, arrivals inside steps."""
    rnd = random.Random(seed)
    b, n = rnd.choice([2, 3, 4]), rnd.randint(1, 10)
    chunked = rnd.random() < 0.7
    prompts = [rnd.randint(1, 20) for _ in range(n)]
    outputs = [rnd.randint(1, 12) for _ in range(n)]
    groups = [rnd.choice([None, 0, 1]) for _ in range(n)]
    lead = {g: rnd.randint(1, 5) * b for g in (0, 1)}
    shared = [min(lead[g], p // b * b) if g is not None else 0
              for g, p in zip(groups, prompts, strict=True)]
    groups = [g if s else None for g, s in zip(groups, shared, strict=True)]
    for g in (0, 1):  # one prefix per group: its members' shortest
        low = min([s for s, h in zip(shared, groups, strict=True) if h == g], default=0)
        shared = [low if h == g else s for s, h in zip(shared, groups, strict=True)]
    peak = max(-(-(p + o - 1) // b) for p, o in zip(prompts, outputs, strict=True))
    budget = rnd.randint(max(n, 4), 30)
    if not chunked:
        budget = max([budget] + [p + o for p, o in zip(prompts, outputs, strict=True)])
    engine = dict(num_blocks=peak + 1 + rnd.randint(0, 4 * n), b=b, budget=budget,
                  seqs=rnd.randint(1, n + 1), chunked=chunked, caching=rnd.random() < 0.8,
                  threshold=rnd.choice([0, 0, 3, 5]) if chunked else 0)
    arrivals = sorted(rnd.choice([0, 0, 0.5, 1, 2, 3.5, 5]) for _ in range(n))
    case = dict(arrivals=arrivals, prompts=prompts, outputs=outputs, groups=groups,
                shared=shared)
    return case, engine


def _compare(case: dict, e: dict, fast: bool) -> None:
    """kvplan's run equals tests/vllm_v1_reference.py's, step by step and request by request."""
    steps, reqs, stats = replay(**case, **e)
    hashes = [[1000 * g + j for j in range(s // e["b"])] if g is not None else []
              for g, s in zip(case["groups"], case["shared"], strict=True)]
    w = workload(case["arrivals"], case["prompts"], case["outputs"], hashes=hashes,
                 hash_tokens=e["b"])
    lim = Limits(max_num_batched_tokens=e["budget"], max_num_seqs=e["seqs"],
                 chunked_prefill=e["chunked"], prefix_caching=e["caching"],
                 long_prefill_token_threshold=e["threshold"])
    r = simulate(w, timer=LinearTimer(base_s=1.0), num_blocks=e["num_blocks"],
                 block_size=e["b"], limits=lim, fast=fast, validate=True)
    assert not r.rejected
    assert r.steps.new_tokens.tolist() == [t for t, _ in steps]
    assert r.steps.used_blocks.tolist() == [u for _, u in steps]
    assert r.first_token_s.tolist() == [q.first for q in reqs]
    assert r.finish_s.tolist() == [q.finish for q in reqs]
    assert r.preemptions.tolist() == [q.preemptions for q in reqs]
    if e["caching"]:  # vLLM counts no lookup with caching off (kvplan: hits 0)
        assert (r.prefix_query_tokens, r.prefix_lookup_hits) == stats


@pytest.mark.parametrize("fast", [True, False])
def test_simulator_matches_an_independent_model_of_vllm_0_11(loop, fast):
    # 150 random small workloads (prefix sharing, preemption, recompute hits, eviction,
    # chunked prefill off, caps): every step's tokens and blocks in use, every request's
    # first token, finish and preemptions equal tests/vllm_v1_reference.py's.
    for seed in range(150):
        _compare(*_random_case(seed), fast)
