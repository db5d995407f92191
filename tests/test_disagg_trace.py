"""Exact event traces of 1P1D fleets worked by hand (docs/disaggregation.md, "Worked traces").

Both pools: block size 4, step = 1 s + 0.25 s per new token (LinearTimer), budget 16 tokens.
KV: 100 bytes per token, so a 4-token page is 400 bytes; link 400 B/s per GPU, latency 0.5 s,
TP1 to TP1: a transfer of b bytes takes b / 400 + 0.5 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.memory.kv_transfer import GroupPages, TransferCost
from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.disagg.fleet import PoolSim, simulate_disagg
from kvplan.sim.scheduler import Limits
from kvplan.sim.testing import LinearTimer, workload

TIMER = LinearTimer(base_s=1.0, per_token_s=0.25)
SHAPE = KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=100),))
LIMITS = Limits(max_num_batched_tokens=16, max_num_seqs=8, prefix_caching=False)
COST = TransferCost(groups=(GroupPages(layers=1, block_size=4, page_bytes=400),),
                    prefill_tp=1, decode_tp=1, bytes_per_s_per_gpu=400.0, latency_s=0.5)


@pytest.fixture(autouse=True, params=["core", "python"])
def both_paths(request):
    """Every trace on the compiled fleet (sim/disagg/compiled.py, where it was built and
    covers the fleet) and on the Python fleet (the reference)."""
    if request.param == "core":
        yield
        return
    from tests.core_helpers import python_loop

    with python_loop():
        yield


def _pool(blocks: int) -> PoolSim:
    return PoolSim(instances=1, timer=TIMER, num_blocks=blocks, shape=SHAPE, limits=LIMITS)


def _steps(r) -> list[tuple[float, float, int]]:
    return [(float(a), float(b), int(u))
            for a, b, u in zip(r.steps.start_s, r.steps.end_s, r.steps.used_blocks, strict=True)]


def _run(prompts: list[int], outputs: list[int], decode_blocks: int):
    w = workload([0.0, 0.5], prompts, outputs)
    return simulate_disagg(w, prefill=_pool(64), decode=_pool(decode_blocks), transfer=COST,
                           validate=True)


def test_two_requests_no_waiting_for_blocks() -> None:
    """r0 (t=0, 8 prompt, 3 out), r1 (t=0.5, 4 prompt, 2 out).

    prefill  [0, 3]   r0's 8 tokens: 1 + 0.25 x 8 = 3 s; sampled at 3 (discarded by proxy)
             [3, 5]   r1's 4 tokens: 1 + 1 = 2 s
    link     r0: 2 pages = 800 B, admitted at 3 (decode idle): 800/400 + 0.5 -> [3, 5.5]
             r1: 1 page = 400 B, admitted at 5: NICs free at 3 + 2 = 5 -> [5, 6.5]
    decode   [5.5, 6.75]  r0 recomputes its last prompt token (1.25 s), first token 6.75
             [6.75, 8.25] r0 + r1 (r1 ready at 6.5): 1 + 0.25 x 2; r1's first token 8.25
             [8.25, 9.75] both sample their last token
    """
    r = _run([8, 4], [3, 2], 64)
    t = r.transfers
    assert t.prefill_end_s.tolist() == [3.0, 5.0]
    assert t.decode_arrival_s.tolist() == [3.0, 5.0]
    assert t.admitted_s.tolist() == [3.0, 5.0]
    assert t.start_s.tolist() == [3.0, 5.0]
    assert t.end_s.tolist() == [5.5, 6.5]
    assert t.link_bytes.tolist() == [800, 400] and r.moved_bytes == 1200
    assert t.waited_for_blocks.tolist() == [False, False]
    assert _steps(r.prefill[0]) == [(0.0, 3.0, 2), (3.0, 5.0, 3)]
    # decode blocks: r0 2 + r1 1 (allocated at admission), then r0 3, then r1 2
    assert _steps(r.decode[0]) == [(5.5, 6.75, 3), (6.75, 8.25, 4), (8.25, 9.75, 5)]
    c = r.client
    assert c.first_token_s.tolist() == [6.75, 8.25]
    assert c.finish_s.tolist() == [9.75, 9.75]
    assert c.token_times(0).tolist() == [6.75, 8.25, 9.75]
    assert c.token_times(1).tolist() == [8.25, 9.75]
    assert (c.first_token_s - c.sent_s).tolist() == [6.75, 7.75]  # TTFT from the decode side


def test_decode_pool_full_holds_the_prefill_blocks() -> None:
    """Decode pool: 4 blocks, 3 usable. r0 (8 prompt, 3 out), r1 (8 prompt, 2 out).

    prefill  [0, 3] r0; [3, 6] r1 (1 + 0.25 x 8); used 2, then 4 (r0's 2 still held until
             its transfer ends at 5.5, freed at the next step boundary, 6)
    decode   r0 admitted at 3 (2 blocks, 1 free), link [3, 5.5]
             [5.5, 6.75] r0's last prompt token (first token 6.75); r1 reaches decode at 6
             at 6.75 r1 needs 2 blocks, 1 free: waits (holding its prefill blocks)
             [6.75, 8.0] r0 writes position 8: a 3rd block (0 free)
             [8.0, 9.25] r0's last token; finished, 3 blocks freed
             at 9.25 r1 admitted: link [9.25, 11.75]; [11.75, 13.0] first token; [13, 14.25]
    """
    r = _run([8, 8], [3, 2], 4)
    t = r.transfers
    assert t.prefill_end_s.tolist() == [3.0, 6.0]
    assert t.admitted_s.tolist() == [3.0, 9.25]
    assert t.start_s.tolist() == [3.0, 9.25]
    assert t.end_s.tolist() == [5.5, 11.75]
    assert t.waited_for_blocks.tolist() == [False, True]
    assert t.prefill_hold_s.tolist() == [2.5, 5.75]
    assert _steps(r.prefill[0]) == [(0.0, 3.0, 2), (3.0, 6.0, 4)]
    assert _steps(r.decode[0]) == [(5.5, 6.75, 2), (6.75, 8.0, 3), (8.0, 9.25, 3),
                                   (11.75, 13.0, 2), (13.0, 14.25, 3)]
    c = r.client
    assert c.first_token_s.tolist() == [6.75, 13.0]
    assert c.finish_s.tolist() == [9.25, 14.25]


def test_transfers_queue_on_the_nics() -> None:
    """Two 8-token prompts (800 B each) at t=0 share one prefill step (16 tokens:
    1 + 4 = 5 s), reach decode at 5 and are admitted at 5; the second waits for the NICs:
    [5, 7.5] and [7, 9.5] (wire 2 s each, latency 0.5 s)."""
    w = workload([0.0, 0.0], [8, 8], [2, 2])
    r = simulate_disagg(w, prefill=_pool(64), decode=_pool(64), transfer=COST, validate=True)
    t = r.transfers
    assert t.prefill_end_s.tolist() == [5.0, 5.0]
    assert t.start_s.tolist() == [5.0, 7.0]
    assert t.end_s.tolist() == [7.5, 9.5]
    assert t.queue_s.tolist() == [0.0, 2.0]


@pytest.mark.parametrize(("x", "y", "start", "decode", "first"),
                         [(1, 2, [5.0, 7.0], [0, 1], [8.75, 10.75]),
                          (2, 1, [3.0, 5.0], [0, 0], [6.75, 9.25]),
                          (2, 2, [3.0, 3.0], [0, 1], [6.75, 6.75])])
def test_a_transfer_holds_both_ends(x: int, y: int, start: list[float], decode: list[int],
                                    first: list[float]) -> None:
    """The same two 8-token prompts on xPyD (round robin on both sides); a transfer takes
    2.5 s, a decode instance's first step for one request 1.25 s.
    1P2D: one prefill step [0, 5], r0 to d0 and r1 to d1 (the step's order), both admitted at
          5: d0 first (the lower instance at a tie), r1 waits for the prefill NICs: [7, 9.5]
    2P1D: r0 on p0, r1 on p1, [0, 3] each (1 + 0.25 x 8), both admitted at 3 on d0: r1
          waits for d0's NICs: [5, 7.5], and for d0's step [6.75, 8] (r0's last token)
    2P2D: nothing shared: both [3, 5.5]"""
    w = workload([0.0, 0.0], [8, 8], [2, 2])
    pre = PoolSim(instances=x, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    dec = PoolSim(instances=y, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    r = simulate_disagg(w, prefill=pre, decode=dec, transfer=COST, validate=True)
    t = r.transfers
    assert t.prefill_instance.tolist() == [0, x - 1]
    assert t.decode_instance.tolist() == decode
    assert t.admitted_s.tolist() == [start[0]] * 2
    assert t.start_s.tolist() == start
    assert t.end_s.tolist() == [s + 2.5 for s in start]
    assert r.client.first_token_s.tolist() == first


def test_decode_instances_take_answers_as_they_come_back() -> None:
    """2P2D. r0 (t=0, 16 tokens) on p0: prefill [0, 5] (1 + 0.25 x 16); r1 (t=0.5, 4 tokens)
    on p1: [0.5, 2.5]. r0's step starts first, r1's ends first: the proxy (vLLM's, which
    awaits each prefill answer, then picks the next decode instance) sends r1 to d0 at 2.5
    and r0 to d1 at 5.
    link     r1: 400 B from p1 to d0, admitted at 2.5: [2.5, 4]; r0: 1600 B from p0 to d1,
             admitted at 5: [5, 9.5]
    decode   d0: [4, 5.25] r1's first token, [5.25, 6.5] its last;
             d1: [9.5, 10.75] r0's first token, [10.75, 12] its last"""
    w = workload([0.0, 0.5], [16, 4], [2, 2])
    pre = PoolSim(instances=2, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    dec = PoolSim(instances=2, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    r = simulate_disagg(w, prefill=pre, decode=dec, transfer=COST, validate=True)
    t = r.transfers
    assert t.prefill_instance.tolist() == [0, 1]
    assert t.prefill_end_s.tolist() == [5.0, 2.5]
    assert t.decode_instance.tolist() == [1, 0]
    assert t.decode_arrival_s.tolist() == [5.0, 2.5]
    assert t.start_s.tolist() == [5.0, 2.5]
    assert t.end_s.tolist() == [9.5, 4.0]
    assert _steps(r.decode[0]) == [(4.0, 5.25, 1), (5.25, 6.5, 2)]
    assert _steps(r.decode[1]) == [(9.5, 10.75, 4), (10.75, 12.0, 5)]
    assert r.client.first_token_s.tolist() == [10.75, 5.25]
    assert r.client.finish_s.tolist() == [12.0, 6.5]


def test_tp4_to_tp8_transfer_arithmetic() -> None:
    """docs/disaggregation.md's example: Llama-3.1-70B-like rank shard, 8 KV heads x 128 x
    2 (K, V) x 2 bytes x 80 layers = 327,680 B/token on all GPUs; at TP8 one decode GPU holds
    1 head: 40,960 B/token; a 4,096-token prompt = 256 pages of 16 tokens.
        rank_bytes = 80 layers x 256 pages x (16 x 512 B) = 167,772,160 B (160 MiB)
        link_bytes = 8 x rank_bytes = 1,342,177,280 B (1.25 GiB)
        wire_s     = link_bytes / (min(4, 8) x 50e9) = 6.7108864 ms; + 5 us latency"""
    page = 16 * 512  # one layer, one KV head (128 x 2 x 2 B = 512 B per token)
    cost = TransferCost(groups=(GroupPages(layers=80, block_size=16, page_bytes=page),),
                        prefill_tp=4, decode_tp=8, bytes_per_s_per_gpu=50e9, latency_s=5e-6)
    p = np.array([4096])
    assert int(cost.rank_bytes(p)[0]) == 167_772_160
    assert int(cost.link_bytes(p)[0]) == 1_342_177_280
    assert cost.wire_s(1_342_177_280) == pytest.approx(6.7108864e-3, rel=1e-12)
    assert cost.transfer_s(1_342_177_280) == pytest.approx(6.7158864e-3, rel=1e-12)
    each = [1_342_177_280, 800, 3]  # the compiled fleet's wire times: LinkQueues' to the bit
    assert cost.wire_s_each(np.array(each)).tolist() == [cost.wire_s(b) for b in each]


def test_sliding_window_and_state_pages() -> None:
    """A 10-token window with 4-token pages still moves cdiv(P, 4) pages (the decode side
    allocates the whole prompt and NixlConnector reads every block); a state group moves its
    state once."""
    cost = TransferCost(groups=(GroupPages(layers=2, block_size=4, page_bytes=40, window=10),
                                GroupPages(layers=1, block_size=4, page_bytes=0,
                                           state_bytes=1000)),
                        prefill_tp=1, decode_tp=1, bytes_per_s_per_gpu=1.0, latency_s=0.0)
    # P = 8: 2 pages; P = 20: 5 pages (not the window's 3)
    assert cost.rank_bytes(np.array([8, 20])).tolist() == [2 * 40 * 2 + 1000,
                                                           2 * 40 * 5 + 1000]


def test_prefill_pool_full_stalls_until_a_transfer_frees_it() -> None:
    """Prefill pool: 3 usable blocks. r0 (t=0, P=8, 3 out) takes 2; r1 (t=0.5, P=8, 2 out)
    needs 2 with 1 free while r0's blocks wait for the link: the prefill instance stalls.

    prefill  [0, 3] r0; at 3 r1 does not fit; r0's transfer [3, 5.5] frees its blocks at 5.5
             [5.5, 8.5] r1 (1 + 0.25 x 8)
    decode   r0: [5.5, 6.75], [6.75, 8.0], [8.0, 9.25]; r1 reaches decode at 8.5, admitted
             at the step boundary 9.25, link [9.25, 11.75], then [11.75, 13.0], [13.0, 14.25]
    """
    w = workload([0.0, 0.5], [8, 8], [3, 2])
    r = simulate_disagg(w, prefill=_pool(4), decode=_pool(64), transfer=COST, validate=True)
    assert _steps(r.prefill[0]) == [(0.0, 3.0, 2), (5.5, 8.5, 2)]
    t = r.transfers
    assert t.prefill_end_s.tolist() == [3.0, 8.5]
    assert t.admitted_s.tolist() == [3.0, 9.25]
    assert t.end_s.tolist() == [5.5, 11.75]
    assert t.waited_for_blocks.tolist() == [False, False]
    assert r.client.first_token_s.tolist() == [6.75, 13.0]
    assert r.client.finish_s.tolist() == [9.25, 14.25]


def test_prompt_larger_than_the_decode_pool_at_once_is_rejected() -> None:
    """A 10-token window over 4-token blocks: a 29-token prompt holds 8 + 3 blocks while it
    decodes, but its KV lands whole (8 + 8 = 16 blocks) on a 15-block decode pool: rejected
    by the decode side (after its prefill: the proxy sends it there first), never lost in
    the queue."""
    shape = KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=8),
                                          CacheGroup(kind="sliding", window=8,
                                                     bytes_per_token=8)))
    pool = PoolSim(instances=1, timer=TIMER, num_blocks=16, shape=shape, limits=LIMITS)
    big = PoolSim(instances=1, timer=TIMER, num_blocks=64, shape=shape, limits=LIMITS)
    w = workload([0.0, 0.0], [29, 8], [1, 2])
    r = simulate_disagg(w, prefill=big, decode=pool, transfer=COST, validate=True)
    assert r.client.rejected == {0: "decode side, after its prefill ran: its 29-token "
                                    "prompt needs 16 KV blocks at once on a decode instance "
                                    "(the transferred KV lands whole); the pool has 15"}
    assert r.client.finished.tolist() == [False, True]


@pytest.mark.parametrize(("router", "placed"), [("round-robin", [0, 1, 0]),
                                                ("least-outstanding", [0, 1, 1])])
def test_routers_on_two_prefill_instances(router: str, placed: list[int]) -> None:
    """2P1D. r0 (t=0, 32 tokens: prefill [0, 9]), r1 (t=0.1, 4 tokens: [0.1, 2.1]),
    r2 (t=3, 4 tokens). Round robin sends r2 to p0, busy until 9: prefill [9, 11];
    least-outstanding sends it to p1, idle since r1 left at 2.1: prefill [3, 5]."""
    w = workload([0.0, 0.1, 3.0], [32, 4, 4], [1, 1, 1])
    two = PoolSim(instances=2, timer=TIMER, num_blocks=64, shape=SHAPE,
                  limits=Limits(max_num_batched_tokens=64, max_num_seqs=8,
                                prefix_caching=False))
    r = simulate_disagg(w, prefill=two, decode=_pool(64), transfer=COST, router=router,
                        validate=True)
    assert r.transfers.prefill_instance.tolist() == placed
    end = 11.0 if router == "round-robin" else 5.0
    assert r.transfers.prefill_end_s.tolist() == [9.0, 2.1, end]


def test_unknown_router() -> None:
    from kvplan.errors import InputError

    with pytest.raises(InputError, match="round-robin or least-outstanding"):
        simulate_disagg(workload([0.0], [4], [1]), prefill=_pool(8), decode=_pool(8),
                        transfer=COST, router="random")


def test_in_flight_peak_is_the_clients() -> None:
    """The first trace: r0 in flight [0, 9.75], r1 [0.5, 9.75]: 2 at once."""
    from kvplan.analysis.metrics import in_flight_peak

    assert in_flight_peak(_run([8, 4], [3, 2], 64).client) == 2
    w = workload([0.0, 20.0], [8, 8], [2, 2])  # the second arrives after the first answered
    r = simulate_disagg(w, prefill=_pool(64), decode=_pool(64), transfer=COST)
    assert in_flight_peak(r.client) == 1
