"""hunt8-sim: the serving simulator and its metrics against vLLM v1 and `vllm bench serve`."""

from __future__ import annotations

from kvplan.analysis.metrics import compute_metrics
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload


def test_max_concurrent_requests_counts_requests_queued_in_the_server() -> None:
    """vLLM bench serve's max_concurrent_requests is the client's peak of requests in flight
    (sent, not yet answered), not the server's running set. Three requests sent at t = 0 to
    a server with max_num_seqs = 1 (1 s per step, prompt 2, output 2): A runs steps 0-1
    (answered at 2.0), B steps 2-3, C steps 4-5. All three are in flight on [0, 2): peak 3;
    the server never runs more than 1 (the value reported before)."""
    r = simulate(workload([0, 0, 0], [2, 2, 2], [2, 2, 2]), timer=LinearTimer(base_s=1.0),
                 num_blocks=100, block_size=4,
                 limits=Limits(max_num_batched_tokens=100, max_num_seqs=1))
    assert r.finish_s.tolist() == [2.0, 4.0, 6.0]
    assert int(r.steps.running.max()) == 1
    assert compute_metrics(r).max_concurrent_requests == 3


def test_prefix_cache_hit_rate_counts_a_preempted_requests_lookup_too() -> None:
    """vLLM 0.11.0's KVCacheManager.get_computed_blocks adds requests += 1, queries +=
    request.num_tokens, hits += num_new_computed_tokens at every lookup, a preempted
    request's included (its num_tokens = prompt + output so far; its own cached blocks
    hit): the preempted_queries / preempted_hits split is vLLM PR 25787, after 0.11.0.
    B = 4, 4 usable blocks, budget 8, 1 s per step, A and B (prompt 6, output 4) at t = 0
    with nothing shared: at step 3 A needs a 3rd block and B is preempted; its full block
    stays cached and at step 4 B (6 + 2 = 8 tokens) readmits hitting it (limit
    (8 - 1) // 4 = 1 block: 4 tokens). Queries 6 + 6 + 8 = 20, hits 0 + 0 + 4: rate
    4 / 20 = 0.2 (0 / 12 when the readmission was left out)."""
    from kvplan.sim.blocks import CacheGroup, KvShape

    w = workload([0.0, 0.0], [6, 6], [4, 4])
    r = simulate(w, timer=LinearTimer(base_s=1.0), num_blocks=5, block_size=4,
                 kv=KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=10),)),
                 limits=Limits(max_num_batched_tokens=8, max_num_seqs=4))
    assert r.preemptions.tolist() == [0, 1]
    assert r.steps.new_tokens.tolist() == [8, 5, 2, 1, 4, 1]  # B recomputed 4, not 8
    assert (r.prefix_query_tokens, r.prefix_lookup_hits) == (20, 4)
    assert r.prefix_hit_tokens.tolist() == [0, 0]  # num_cached_tokens: first admission's
    assert compute_metrics(r).prefix_cache_hit_rate == 0.2


def test_prefix_cache_hit_rate_still_counts_a_new_requests_shared_hits() -> None:
    """X caches the 2 full blocks of an 8-token shared prefix; Y (t = 10) hits both: 8 of the
    20 queried tokens, rate 0.4."""
    r = simulate(workload([0.0, 10.0], [10, 10], [2, 2]), timer=LinearTimer(base_s=1.0),
                 num_blocks=100, block_size=4, shared_prefix_tokens=8,
                 limits=Limits(max_num_batched_tokens=100, max_num_seqs=4))
    assert r.prefix_hit_tokens.tolist() == [0, 8] and r.prefix_query_tokens == 20
    assert compute_metrics(r).prefix_cache_hit_rate == 0.4
