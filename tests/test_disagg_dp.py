"""Data-parallel instances in a disaggregated fleet (sim/disagg/dp_instance.py): an exact
trace worked by hand, and the fleet's invariants with DP pools (hypothesis).

The trace's set-up is test_disagg_trace.py's: block size 4, step = 1 s + 0.25 s per token
(LinearTimer, a DP rank priced at the padded tokens), budget 16; KV 100 B per token (a page
400 B); link 400 B/s per GPU, latency 0.5 s, TP1 to TP1.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.costs.memory.kv_transfer import GroupPages, TransferCost
from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.disagg.dp_instance import DpInstance
from kvplan.sim.disagg.fleet import PoolSim, _Fleet, simulate_disagg
from kvplan.sim.scheduler import Limits
from kvplan.sim.testing import LinearTimer, workload
from tests.disagg_support import assert_transfer_chain

TIMER = LinearTimer(base_s=1.0, per_token_s=0.25)
SHAPE = KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=100),))
LIMITS = Limits(max_num_batched_tokens=16, max_num_seqs=8, prefix_caching=False)
COST = TransferCost(groups=(GroupPages(layers=1, block_size=4, page_bytes=400),),
                    prefill_tp=1, decode_tp=1, bytes_per_s_per_gpu=400.0, latency_s=0.5)


def _steps(r) -> list[tuple[float, float, int, int]]:
    s = r.steps
    return [(float(a), float(b), int(u), int(n))
            for a, b, u, n in zip(s.start_s, s.end_s, s.used_blocks, s.new_tokens, strict=True)]


def test_1p1d_with_a_dp2_decode_instance() -> None:
    """r0 (t=0, 8 prompt, 3 out), r1 (t=0.5, 4 prompt, 2 out); prefill TP1, decode DP=2.

    prefill  [0, 3] r0 (1 + 0.25 x 8); [3, 5] r1 (1 + 0.25 x 4)
    decode   r0 reaches the idle DP instance at 3: a wave starts; the balancer's view is
             (0, 0) on both ranks -> rank 0, admitted at 3 (2 blocks), link [3, 5.5]
             [3, 4.25]    dummy step on both ranks (nothing scheduled: 1 + 0.25 x 1)
             [4.25, 5.5]  dummy again; the step ending 4.25 published rank 0 (1 waiting, 0)
             r1 reaches the instance at 5, sent at the next step start 5.5 to the rank with
             the least 4 x waiting + running in the 5.0 s snapshot (rank 0: 4, rank 1: 0)
             -> rank 1: admitted at 5.5, the prefill NICs free at 5: link [5.5, 7.0]
             [5.5, 6.75]  rank 0: r0's last prompt token (first token 6.75); rank 1 dummy
             [6.75, 8.0]  rank 0: r0's 2nd token; rank 1 dummy (r1's KV lands at 7.0)
             [8.0, 9.25]  rank 0: r0's last token; rank 1: r1's last prompt token (first
                          token 9.25)
             [9.25, 10.5] rank 1: r1's last token; rank 0 dummy
             dummies to the 32nd step [41.75, 43], whose check finds no work: wave over
    Each rank's steps share their boundaries; KV lands where the request runs.
    """
    w = workload([0.0, 0.5], [8, 4], [3, 2])
    pre = PoolSim(instances=1, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    dec = PoolSim(instances=1, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS, dp=2)
    r = simulate_disagg(w, prefill=pre, decode=dec, transfer=COST, validate=True)
    t = r.transfers
    assert t.prefill_end_s.tolist() == [3.0, 5.0]
    assert t.decode_arrival_s.tolist() == [3.0, 5.0]
    assert t.admitted_s.tolist() == [3.0, 5.5]
    assert t.start_s.tolist() == [3.0, 5.5]
    assert t.end_s.tolist() == [5.5, 7.0]
    assert t.link_bytes.tolist() == [800, 400] and r.moved_bytes == 1200
    assert t.decode_rank is not None and t.decode_rank.tolist() == [0, 1]
    assert t.prefill_rank is not None and t.prefill_rank.tolist() == [0, 0]
    assert [(a, b, u) for a, b, u, _ in _steps(r.prefill[0])] == [(0.0, 3.0, 2), (3.0, 5.0, 3)]
    (dp,) = r.decode_dp
    assert dp.rank_of.tolist() == [0, 1]
    r0, r1 = dp.ranks
    tail = [(9.25 + 1.25 * k, 10.5 + 1.25 * k, 0, 0) for k in range(1, 27)]
    assert _steps(r0) == [(3.0, 4.25, 2, 0), (4.25, 5.5, 2, 0), (5.5, 6.75, 2, 1),
                          (6.75, 8.0, 3, 1), (8.0, 9.25, 3, 1), (9.25, 10.5, 0, 0), *tail]
    assert _steps(r1) == [(3.0, 4.25, 0, 0), (4.25, 5.5, 0, 0), (5.5, 6.75, 1, 0),
                          (6.75, 8.0, 1, 0), (8.0, 9.25, 1, 1), (9.25, 10.5, 2, 1), *tail]
    assert len(dp.padded_tokens) == 32 and set(dp.padded_tokens.tolist()) == {1}
    assert dp.dummy_steps_per_rank == (29, 30)
    c = r.client
    assert c.first_token_s.tolist() == [6.75, 9.25]
    assert c.finish_s.tolist() == [9.25, 10.5]
    assert c.token_times(0).tolist() == [6.75, 8.0, 9.25]
    assert c.token_times(1).tolist() == [9.25, 10.5]
    # the instance's merged result: both ranks' blocks summed per step
    assert r.decode[0].steps.used_blocks.tolist()[:6] == [2, 2, 3, 4, 4, 2]


def test_dp2_prefill_rank_holds_until_its_transfer() -> None:
    """Prefill DP=2, decode TP1: r0 and r1 at t=0 reach the idle prefill instance together;
    the balancer sends r0 to rank 0 (its view then counts 1 waiting there) and r1 to rank 1.
    One lockstep step [0, 3]: each rank 8 tokens (1 + 0.25 x 8). Both KVs leave at 3 from
    separate ranks' NICs, to one decode instance's NICs: r0 [3, 5.5], r1 queued [5, 7.5].
    Each prefill rank keeps its 2 blocks until its own transfer ends."""
    w = workload([0.0, 0.0], [8, 8], [2, 2])
    pre = PoolSim(instances=1, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS, dp=2)
    dec = PoolSim(instances=1, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    r = simulate_disagg(w, prefill=pre, decode=dec, transfer=COST, validate=True)
    t = r.transfers
    assert t.prefill_end_s.tolist() == [3.0, 3.0]
    assert t.prefill_rank is not None and t.prefill_rank.tolist() == [0, 1]
    assert t.start_s.tolist() == [3.0, 5.0]
    assert t.end_s.tolist() == [5.5, 7.5]
    (dp,) = r.prefill_dp
    a, b = dp.ranks
    assert [(x, y, u, n) for x, y, u, n in _steps(a)][:3] == [
        (0.0, 3.0, 2, 8), (3.0, 4.25, 2, 0), (4.25, 5.5, 2, 0)]
    # rank 0's blocks freed at the boundary 5.5 (its transfer's end), rank 1's at 8.0
    assert [u for _, _, u, _ in _steps(a)][3] == 0
    assert [u for _, _, u, _ in _steps(b)][:6] == [2, 2, 2, 2, 2, 0]


@st.composite
def fleets(draw):
    n = draw(st.integers(1, 10))
    arrivals = sorted(draw(st.lists(st.floats(0, 20), min_size=n, max_size=n)))
    prompts = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 8), min_size=n, max_size=n))
    shape = KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=8),))
    pages = (GroupPages(layers=1, block_size=4, page_bytes=32),)
    pools = []
    for low in (14, 8):
        limits = Limits(max_num_batched_tokens=draw(st.integers(8, 48)),
                        max_num_seqs=draw(st.integers(1, 6)), prefix_caching=False)
        timer = LinearTimer(base_s=draw(st.sampled_from([0.5, 1.0])),
                            per_token_s=draw(st.sampled_from([0.0, 0.125, 0.25])))
        pools.append(PoolSim(instances=draw(st.integers(1, 2)), timer=timer,
                             num_blocks=draw(st.integers(low, 2 * low + 12)), shape=shape,
                             limits=limits, dp=draw(st.integers(1, 3))))
    cost = TransferCost(groups=pages, prefill_tp=draw(st.sampled_from([1, 2])),
                        decode_tp=draw(st.sampled_from([2, 4])),
                        bytes_per_s_per_gpu=draw(st.sampled_from([16.0, 64.0, 1e6])),
                        latency_s=draw(st.sampled_from([0.0, 0.25, 2.0])))
    router = draw(st.sampled_from(["round-robin", "least-outstanding"]))
    return workload(arrivals, prompts, outputs), pools[0], pools[1], cost, router


def _engines(loops) -> list:
    out = []
    for e in loops:
        out.extend(e.ranks if isinstance(e, DpInstance) else [e])
    return out


@settings(max_examples=120, deadline=None)
@given(fleets())
def test_dp_fleet_invariants(case) -> None:
    """Blocks conserved on every rank (books after every step, every pool empty at the end),
    no request lost, link bytes = the served requests' KV, each request's KV leaves the
    prefill rank that ran it and lands on the decode rank that decodes it."""
    w, pre, dec, cost, router = case
    fleet = _Fleet(w, pre, dec, cost, validate=True, router=router)
    r = fleet.run()
    for e in _engines(fleet.pre) + _engines(fleet.dec):
        assert e.pool.used == 0 and e.pool.free == e.pool.num_blocks
    c, t = r.client, r.transfers
    n = len(w.arrival_s)
    served = ~np.isnan(t.end_s)
    assert set(np.flatnonzero(c.finished).tolist()) | set(c.rejected) == set(range(n))
    assert (served == c.finished).all()
    expected = cost.link_bytes(w.prompt_tokens)
    assert r.moved_bytes == int(expected[served].sum()) == int(t.link_bytes.sum())
    assert len(r.prefill_dp) == (pre.instances if pre.dp > 1 else 0)
    assert len(r.decode_dp) == (dec.instances if dec.dp > 1 else 0)
    for side, dps, inst, ranks in (("p", r.prefill_dp, t.prefill_instance, t.prefill_rank),
                                   ("d", r.decode_dp, t.decode_instance, t.decode_rank)):
        assert ranks is not None
        assert ((ranks >= 0) == served).all()
        for i, dp in enumerate(dps):
            for q in np.flatnonzero(served & (inst == i)).tolist():
                k = int(ranks[q])
                assert dp.rank_of[q] == k
                assert dp.ranks[k].finished[q]  # it ran (prefill) or finished (decode) there
                assert all(not o.finished[q] for j, o in enumerate(dp.ranks) if j != k)
            for res in dp.ranks:
                assert (res.steps.used_blocks <= res.usable_blocks).all()
                assert np.array_equal(res.steps.end_s, dp.ranks[0].steps.end_s)
        if not dps:
            assert (ranks[served] == 0).all(), side
    done = c.finished
    assert (c.arrival_s[done] <= t.prefill_end_s[done]).all()
    assert_transfer_chain(r, cost, expected)


def test_dp1_pools_match_the_tp_fleet() -> None:
    """dp=1 is today's fleet: the same trace as without the field (and the compiled path)."""
    w = workload([0.0, 0.5, 1.0], [8, 4, 12], [3, 2, 4])
    pool = PoolSim(instances=1, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    a = simulate_disagg(w, prefill=pool, decode=pool, transfer=COST)
    b = _Fleet(w, pool, pool, COST, validate=True).run()
    assert a.client.finish_s.tolist() == b.client.finish_s.tolist()
    assert a.transfers.end_s.tolist() == b.transfers.end_s.tolist()
    assert b.transfers.decode_rank is not None
    assert b.transfers.decode_rank.tolist() == [0, 0, 0]
    assert a.prefill_dp == a.decode_dp == ()
    assert a.transfers.prefill_rank is not None and a.transfers.decode_rank is not None
    assert a.transfers.prefill_rank.tolist() == a.transfers.decode_rank.tolist() == [0, 0, 0]
