"""Which decode instance: the proxy routes prefill answers as they come back (vLLM's
toy_proxy_server.py awaits the prefill response, then picks the next decode instance), so
round robin runs in the order of (prefill finish time, prefill instance, plan order within
the finishing step) on both paths (docs/disaggregation.md, "Which decode instance")."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim.disagg.fleet import PoolSim, _Fleet, simulate_disagg
from kvplan.sim.disagg.link import NIXL_ABORT_REQUEST_TIMEOUT_S
from kvplan.sim.testing import workload
from tests.core_helpers import python_loop
from tests.test_disagg_compiled import assert_same_fleet
from tests.test_disagg_properties import fleets
from tests.test_disagg_trace import COST, LIMITS, SHAPE, TIMER


class _LearnOrderFleet(_Fleet):
    """The rule before answers were routed as they come back: each request went to a decode
    instance the moment the fleet learned of its prefill finish (when its step was
    planned), i.e. in the order prefill steps start."""

    def _prefill_done(self, p: int, r: int, end: float) -> None:
        self.out_p.done(p, end)
        self.p_end[r] = end
        if r in self.late:  # refused by decode: the prefill side frees it after the timeout
            self.pre[p].release(end + NIXL_ABORT_REQUEST_TIMEOUT_S, r)
        self._to_decode(r, end)


def _answer_order(r) -> tuple[np.ndarray, np.ndarray]:
    """The prefill answers in (prefill finish, prefill instance, plan order) order, and
    their decode instances (-1: refused by the decode side, its turn taken). Plan order: a
    request's place in its prefill instance's emission runs (seg_req; one run each, as
    each samples its one token once)."""
    t = r.transfers
    served = np.flatnonzero(~np.isnan(t.prefill_end_s))
    place = np.full(len(t.decode_instance), -1)
    for res in r.prefill:
        assert len(np.unique(res.seg_req)) == len(res.seg_req)
        place[res.seg_req] = np.arange(len(res.seg_req))
    assert (place[served] >= 0).all()
    key = np.lexsort((place[served], t.prefill_instance[served], t.prefill_end_s[served]))
    return served[key], t.decode_instance[served[key]]


@settings(max_examples=150, deadline=None)
@given(fleets(), st.integers(1, 3), st.booleans())
def test_decode_instances_take_answers_round_robin_as_they_come_back(case, y, python) -> None:
    """Round robin over the decode instances in (finish, instance, plan order), with each
    request reaching its decode instance when its answer comes back (no API delay here)."""
    w, pre, dec, cost, _ = case
    dec = replace(dec, instances=y)
    if python:
        with python_loop():
            r = simulate_disagg(w, prefill=pre, decode=dec, transfer=cost, validate=True)
    else:
        r = simulate_disagg(w, prefill=pre, decode=dec, transfer=cost, validate=True)
    order, got = _answer_order(r)
    sent = got >= 0
    assert got[sent].tolist() == (np.arange(len(order)) % y)[sent].tolist()
    assert set(order[~sent].tolist()) <= set(r.client.rejected)
    t = r.transfers
    assert np.array_equal(t.decode_arrival_s[order[sent]], t.prefill_end_s[order[sent]])


@settings(max_examples=150, deadline=None)
@given(fleets(), st.integers(1, 3))
def test_one_prefill_instance_routes_as_before(case, y) -> None:
    """1PyD: one instance's steps end in the order they start, so answers come back in the
    order the fleet learns of them: every result equal to the old rule's, to the bit, with
    either router."""
    w, pre, dec, cost, router = case
    pre, dec = replace(pre, instances=1), replace(dec, instances=y)
    new = _Fleet(w, pre, dec, cost, validate=True, router=router).run()
    old = _LearnOrderFleet(w, pre, dec, cost, validate=True, router=router).run()
    assert_same_fleet(new, old)


def test_several_prefill_instances_route_differently_from_before() -> None:
    """The hand trace of test_disagg_trace.py (2P2D): r0's 5 s step starts first on p0,
    r1's 2 s step starts at 0.5 on p1 and ends first; the old rule sent r0 to d0."""
    w = workload([0.0, 0.5], [16, 4], [2, 2])
    two = PoolSim(instances=2, timer=TIMER, num_blocks=64, shape=SHAPE, limits=LIMITS)
    new = _Fleet(w, two, two, COST, validate=True).run()
    old = _LearnOrderFleet(w, two, two, COST, validate=True).run()
    assert new.transfers.decode_instance.tolist() == [1, 0]
    assert old.transfers.decode_instance.tolist() == [0, 1]
