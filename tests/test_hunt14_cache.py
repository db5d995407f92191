"""Hunt 14, prefix caching in the simulator against vLLM 0.11.0's KV cache manager
(vllm/v1/core/kv_cache_manager.py, block_pool.py; 1 s per step). Each trace runs on the
compiled core (where built), the Python fast path and the step-by-step reference."""

from __future__ import annotations

import pytest

from kvplan.analysis.metrics import compute_metrics
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload


@pytest.fixture(params=["core", "python"])
def loop(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    return request.param


@pytest.mark.parametrize("fast", [True, False])
def test_hit_rate_counts_every_lookup_of_a_blocked_request(loop, fast):
    # vLLM 0.11's get_computed_blocks adds request.num_tokens to PrefixCacheStats.queries
    # and the hit tokens to .hits at every lookup of a new request, also when
    # allocate_slots then fails and the request is looked up again next step.
    # B = 2, 4 usable blocks. X (prompt 4, output 4) and Y (prompt 8, output 1) share block 0
    # (hash 10). Step 1: X misses (4 queried), gets 2 blocks, caches block 0; Y hits it
    # (2 of 8) but needs 3 more blocks, 2 free: blocked. Steps 2-4: X decodes (takes its
    # 3rd and 4th block), Y is looked up each step: 2 of 8 again, blocked. X finishes at
    # 4 s; step 5: Y hits 2 of 8 and is admitted. Queries 4 + 5 x 8 = 44, hits 5 x 2 = 10:
    # 22.7 %. Counted on admission only (before): 12 and 2, 16.7 %.
    w = workload([0, 0], [4, 8], [4, 1], hashes=[[10], [10]], hash_tokens=2)
    lim = Limits(max_num_batched_tokens=16, max_num_seqs=4)
    r = simulate(w, timer=LinearTimer(base_s=1.0), num_blocks=5, block_size=2, limits=lim,
                 fast=fast, validate=True)
    assert r.steps.new_tokens.tolist() == [4, 1, 1, 1, 6]
    assert r.finish_s.tolist() == [4.0, 5.0]
    assert r.prefix_hit_tokens.tolist() == [0, 2]  # vLLM's num_cached_tokens: set once
    assert (r.prefix_query_tokens, r.prefix_lookup_hits) == (44, 10)
    m = compute_metrics(r)
    assert round(100 * m.prefix_cache_hit_rate, 1) == 22.7
