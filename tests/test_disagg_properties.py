"""Invariants of the disaggregated fleet on random small fleets and workloads (hypothesis).

Blocks are conserved in every instance of both pools (the books checked after every turn,
every pool empty at the end), no request is lost, the link moves exactly the KV bytes of
the requests it served, and each request's events come in the only possible order with
TTFT >= its prefill compute + its transfer.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.costs.memory.kv_transfer import GroupPages, TransferCost
from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.disagg.fleet import PoolSim, _Fleet
from kvplan.sim.scheduler import Limits
from kvplan.sim.testing import LinearTimer, workload
from tests.disagg_support import assert_transfer_chain

B = 4


@st.composite
def fleets(draw):
    n = draw(st.integers(1, 12))
    arrivals = sorted(draw(st.lists(st.floats(0, 20), min_size=n, max_size=n)))
    prompts = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 10), min_size=n, max_size=n))
    sliding = draw(st.booleans())
    groups = (CacheGroup(bytes_per_token=8),)
    pages = (GroupPages(layers=1, block_size=B, page_bytes=B * 8),)
    if sliding:  # a full and a sliding-window group (general steps, windows freed in decode)
        groups += (CacheGroup(kind="sliding", window=8, bytes_per_token=8),)
        pages += (GroupPages(layers=1, block_size=B, page_bytes=B * 8, window=8),)
    shape = KvShape(block_size=B, groups=groups)
    hashes = None
    if not sliding and draw(st.booleans()):  # shared prefixes: the prefill side's cache
        hashes = [draw(st.lists(st.integers(0, 2), min_size=p // B, max_size=p // B))
                  for p in prompts]
    pools = []
    for low in (14, 8) if not sliding else (28, 16):
        limits = Limits(max_num_batched_tokens=draw(st.integers(8, 48)),
                        max_num_seqs=draw(st.integers(1, 6)),
                        chunked_prefill=True, prefix_caching=hashes is not None)
        timer = LinearTimer(base_s=draw(st.sampled_from([0.5, 1.0])),
                            per_token_s=draw(st.sampled_from([0.0, 0.125, 0.25])))
        pools.append(PoolSim(instances=draw(st.integers(1, 3)), timer=timer,
                             num_blocks=draw(st.integers(low, 2 * low + 12)),
                             shape=shape, limits=limits))
    cost = TransferCost(groups=pages,
                        prefill_tp=draw(st.sampled_from([1, 2, 4])),
                        decode_tp=draw(st.sampled_from([1, 2, 8])),
                        bytes_per_s_per_gpu=draw(st.sampled_from([16.0, 64.0, 1e6])),
                        latency_s=draw(st.sampled_from([0.0, 0.25, 2.0])))
    w = workload(arrivals, prompts, outputs, hashes=hashes, hash_tokens=B)
    router = draw(st.sampled_from(["round-robin", "least-outstanding"]))
    return w, pools[0], pools[1], cost, router


@settings(max_examples=150, deadline=None)
@given(fleets())
def test_fleet_invariants(case) -> None:
    w, pre, dec, cost, router = case
    fleet = _Fleet(w, pre, dec, cost, validate=True, router=router)
    r = fleet.run()
    for loop in (*fleet.pre, *fleet.dec):
        assert loop.pool.used == 0  # every block back: finished, released, freed
        assert loop.pool.free == loop.pool.num_blocks
    c, t = r.client, r.transfers
    served = ~np.isnan(t.end_s)
    n = len(w.arrival_s)
    assert set(np.flatnonzero(c.finished).tolist()) | set(c.rejected) == set(range(n))
    assert not (c.finished & np.isin(np.arange(n), list(c.rejected))).any()
    assert (served == c.finished).all()
    expected = cost.link_bytes(w.prompt_tokens)
    assert r.moved_bytes == int(expected[served].sum()) == int(t.link_bytes.sum())
    done = c.finished
    sched = c.scheduled_s[done]
    assert (c.arrival_s[done] <= sched).all() and (sched <= t.prefill_end_s[done]).all()
    took = assert_transfer_chain(r, cost, expected)
    # TTFT >= the prefill compute (the prompt's own steps) + the transfer
    compute = t.prefill_end_s[done] - sched
    ttft = c.first_token_s[done] - c.arrival_s[done]
    assert (ttft >= compute + took - 1e-9).all()
    for res in (*r.prefill, *r.decode):
        assert (res.steps.used_blocks <= res.usable_blocks).all()
    for d, res in enumerate(r.decode):  # a decode instance holds each whole prompt once
        mine = done & (t.decode_instance == d)
        held = [dec.shape.blocks_one(int(p), 0) for p in w.prompt_tokens[mine]]
        assert max(held, default=0) <= res.peak_kv_blocks <= res.usable_blocks
        assert res.admission_peak_blocks <= res.usable_blocks
