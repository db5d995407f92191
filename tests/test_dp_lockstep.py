"""The lockstep DP fleet (sim/dp): an exact step trace worked by hand, vLLM's load balancer,
and invariants (no request lost, blocks conserved per rank, step boundaries shared)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import InputError
from kvplan.sim.blocks import KvShape
from kvplan.sim.dp.balancer import DpBalancer
from kvplan.sim.dp.lockstep import RankSim, simulate_dp
from kvplan.sim.scheduler import Limits
from kvplan.sim.testing import LinearTimer, workload

TIMER = LinearTimer(base_s=1.0, per_token_s=0.1)  # step = 1 + 0.1 x padded tokens


def _sim(ranks: int = 2, blocks: int = 100, tokens: int = 8, seqs: int = 4) -> RankSim:
    return RankSim(ranks=ranks, timer=TIMER, num_blocks=blocks, shape=KvShape(block_size=16),
                   limits=Limits(max_num_batched_tokens=tokens, max_num_seqs=seqs))


def test_hand_trace_two_ranks() -> None:
    """r0 (t 0, prompt 4, out 2) -> rank 0; r1 (t 0, prompt 8, out 1): scores 4, 0 -> rank 1;
    r2 (t 0.5, prompt 2, out 3): no stats forward before 0.5 (the first counts are
    published at 1.8), local counts (1, 0) and (1, 0), scores 4, 4 -> rank 0.

    step 0 [0, 1.8]:   rank 0 r0 4 tokens, rank 1 r1 8 tokens; pad 8: 1 + 0.8 = 1.8 each.
                       r0's first token and r1's only token at 1.8 (r1 done).
    step 1 [1.8, 3.1]: rank 0 r0 decode + r2 prompt = 3 tokens; rank 1 idle: dummy at pad 3:
                       1.3 each. r0 done at 3.1, r2's first token at 3.1.
    step 2 [3.1, 4.2], step 3 [4.2, 5.3]: r2 decodes (pad 1: 1.1); r2 done at 5.3.
    steps 4..31: dummy on both ranks until the 32-step all-reduce finds no work."""
    r = simulate_dp(workload([0.0, 0.0, 0.5], [4, 8, 2], [2, 1, 3]), _sim(), validate=True)
    f = r.fleet
    assert r.rank_of.tolist() == [0, 1, 0]
    np.testing.assert_allclose(f.first_token_s, [1.8, 1.8, 3.1])
    np.testing.assert_allclose(f.finish_s, [3.1, 1.8, 5.3])
    assert r.padded_tokens.tolist()[:4] == [8, 3, 1, 1] and len(r.padded_tokens) == 32
    np.testing.assert_allclose(r.rank_step_s[:4], [[1.8, 1.8], [1.3, 1.3], [1.1, 1.1],
                                                   [1.1, 1.1]])
    np.testing.assert_allclose(f.steps.end_s[:4], [1.8, 3.1, 4.2, 5.3])
    assert r.dummy_steps_per_rank == (28, 31)
    assert f.steps.used_blocks.tolist()[:5] == [2, 2, 1, 1, 0]
    assert r.peak_kv_blocks_per_rank == (2, 1)


def test_slowest_rank_sets_the_step() -> None:
    """Context priced per rank: rank 0's long context makes both ranks' step its time."""
    timer = LinearTimer(base_s=1.0, per_token_s=0.0, per_context_s=0.01)
    sim = RankSim(ranks=2, timer=timer, num_blocks=100, shape=KvShape(block_size=16),
                  limits=Limits(max_num_batched_tokens=64, max_num_seqs=4))
    r = simulate_dp(workload([0.0, 0.0], [50, 2], [3, 3]), sim)
    # step 1: rank 0 decodes over 50 cached (1.5 s), rank 1 over 2 (1.02 s): the step is 1.5
    np.testing.assert_allclose(r.rank_step_s[1], [1.5, 1.02])
    np.testing.assert_allclose(r.fleet.steps.end_s[1] - r.fleet.steps.start_s[1], 1.5)


def test_balancer_counts_forward_every_100ms() -> None:
    lb = DpBalancer(2)
    assert [lb.pick(0.0), lb.pick(0.01)] == [0, 1]  # local waiting +1 each
    lb.publish(0.05, ((0, 1), (0, 0)))  # both admitted; rank 0 still running
    assert lb.pick(0.06) == 0  # no forward yet: local (1, 0) (1, 0) -> first lowest
    assert lb.pick(0.12) == 1  # forward at 0.1: (0, 1) (0, 0) -> rank 1
    assert lb.view == [[0, 1], [1, 0]]


def test_balancer_weights_waiting_four_to_one() -> None:
    lb = DpBalancer(2)
    lb.publish(0.0, ((1, 0), (0, 3)))
    assert lb.pick(0.1) == 1  # 4 x 1 + 0 = 4 > 0 + 3


def test_bad_input() -> None:
    with pytest.raises(InputError, match="at least two blocks"):
        simulate_dp(workload([0.0], [4], [1]), _sim(blocks=1))
    with pytest.raises(InputError, match="max-concurrency"):
        simulate_dp(workload([0.0], [4], [1], concurrency=1), _sim())


@settings(max_examples=40, deadline=None)
@given(ranks=st.integers(1, 4), blocks=st.integers(6, 40),
       reqs=st.lists(st.tuples(st.floats(0, 5), st.integers(1, 60), st.integers(1, 12)),
                     min_size=1, max_size=14))
def test_invariants(ranks: int, blocks: int, reqs: list[tuple[float, int, int]]) -> None:
    """No request lost, blocks conserved on every rank (validate), boundaries shared,
    every step as long as its slowest rank and padded to its widest."""
    reqs.sort()
    w = workload([a for a, _, _ in reqs], [p for _, p, _ in reqs], [o for _, _, o in reqs])
    r = simulate_dp(w, _sim(ranks=ranks, blocks=blocks, tokens=16), validate=True)
    f = r.fleet
    assert int(f.finished.sum()) + len(f.rejected) == len(reqs)
    for k, rank in enumerate(r.ranks):
        np.testing.assert_array_equal(rank.steps.end_s, f.steps.end_s)
        assert set(np.flatnonzero(r.rank_of == k)) >= set(np.flatnonzero(rank.finished))
        assert np.all(rank.steps.new_tokens <= r.padded_tokens)
    dur = f.steps.end_s - f.steps.start_s
    np.testing.assert_allclose(dur, r.rank_step_s.max(axis=1))
    assert np.all(f.steps.start_s[1:] >= f.steps.end_s[:-1] - 1e-12)
    assert len(f.steps.end_s) % 32 == 0  # every wave ends at a 32-step all-reduce


def test_progress_reports_every_request_done() -> None:
    seen: list[tuple[int, int]] = []
    simulate_dp(workload([0.0, 0.0, 0.5], [4, 8, 2], [2, 1, 3]), _sim(),
                progress=lambda d, n: seen.append((d, n)))
    assert seen[-1] == (3, 3)


def test_waves_and_dummy_tail() -> None:
    """r0 (t 0, prompt 4, out 1) -> rank 0: step 0 [0, 1.4] (pad 4), then dummy steps of
    1.1 s. Rank 0's counts after step 0 are (0, 0), as seeded, so nothing is published and
    the front end's local +1 stands: r1 (t 2.0, prompt 4, out 1) -> rank 1 (scores 4, 0),
    during dummy step 1 [1.4, 2.5]: it waits for it, its step is [2.5, 3.9]. The wave ends
    after 32 steps, at 1.4 + 1.4 + 30 x 1.1 = 35.8; r2 (t 100) -> rank 0 (scores 4, 4)
    starts a second wave: [100, 101.4], 64 steps in all."""
    r = simulate_dp(workload([0.0, 2.0, 100.0], [4, 4, 4], [1, 1, 1]), _sim(), validate=True)
    f = r.fleet
    assert r.rank_of.tolist() == [0, 1, 0]
    np.testing.assert_allclose(f.first_token_s, [1.4, 3.9, 101.4])
    assert len(f.steps.end_s) == 64
    np.testing.assert_allclose(f.steps.end_s[31], 35.8)
    np.testing.assert_allclose(f.steps.start_s[32], 100.0)
