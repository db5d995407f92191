"""The disaggregated fleet on the compiled core: each instance runs whole in C, pool by pool,
and the pools' coupling is iterated to its fixed point.

Pools meet at two points: a prefill instance's finish times are the decode instance's
arrivals, and the decode instance's transfer ends are when the prefill instance frees the
request's blocks. So::

    P_0     = each prefill instance run with blocks freed as requests finish (a guess)
    D_k     = the decode instance fed P_k's finish times (the link inside it) -> R_k+1,
              every transfer's end
    P_k+1   = each prefill instance with its blocks released at R_k+1
    stop when P_k+1's finish times equal P_k's: D_k is then what the decode instance does
    fed P_k+1, and (P_k+1, D_k) is consistent

A consistent pair is the fleet's trajectory: every event follows its causes by a positive
time (a step takes time; a transfer ends after its admission), so two consistent pairs agree
event by event from the first (docs/disaggregation.md, "The compiled fleet"). Where a round
does not reach it (a release falls due before its request finished, or ``ROUNDS`` pass: the
prefill pool ran out of blocks), the caller runs the Python fleet (fleet.py), the reference
this is tested against to the bit (tests/test_disagg_compiled.py).

Covered: one decode instance (its link queues are then all in its run), and one prefill
instance or round-robin routing (the proxy's choice is then known in advance).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol

import numpy as np

from kvplan.sim import core
from kvplan.sim.disagg.link import LinkQueues
from kvplan.sim.disagg.result import DisaggResult
from kvplan.sim.result import FloatArray, IntArray, SimulationResult
from kvplan.sim.state import REJECTED


class _Fleet(Protocol):
    """What this module reads from and writes to fleet._Fleet (a protocol: fleet.py imports
    this module)."""

    pre: list[Any]
    dec: list[Any]
    least: bool
    rejected: dict[int, str]
    order: list[int]
    engine_at: list[float]
    d_delay: FloatArray
    nbytes: IntArray
    link: LinkQueues
    p_of: IntArray
    d_of: IntArray
    p_end: FloatArray
    t_start: FloatArray
    t_end: FloatArray

    def assemble(self, pre: tuple[SimulationResult, ...],
                 dec: tuple[SimulationResult, ...]) -> DisaggResult: ...

ROUNDS = 4
"""Prefill runs after the first before the Python fleet takes over."""
_STATE = ("computed", "generated", "held", "status", "sent_s", "scheduled_s",
          "first_token_s", "finish_s", "preemptions", "hit_tokens", "last_emit", "seg_start")


class _Runner:
    """One instance's runs in the core: fresh copies of its initial state each time."""

    def __init__(self, loop: Any, picked: tuple[ModuleType, tuple[object, ...]]) -> None:
        self.loop, (self.mod, self.form) = loop, picked
        s = loop.s
        self.n = len(s.arrival)
        self.keys = core.keys(s.shared_keys, self.n)
        self.groups = core.groups(loop.shape)
        self.wire: FloatArray | None = None

    def run(self, ids: IntArray, at: FloatArray, dis: tuple[Any, ...] | None
            ) -> tuple[list[np.ndarray], tuple[Any, ...]] | None:
        """Requests ``ids`` reach the instance at ``at`` (in that order); None if the core
        gave up on a release guess."""
        s, lim, n = self.loop.s, self.loop.limits, self.n
        state = [getattr(s, f).copy() for f in _STATE]
        arrival = np.full(n, np.inf)
        arrival[:len(ids)] = at
        order = np.zeros(n, dtype=np.int64)
        order[:len(ids)] = ids
        zeros = np.zeros(n)
        arrays = (arrival, np.ascontiguousarray(s.prompt), np.ascontiguousarray(s.output),
                  np.zeros(n, dtype=np.uint8), *state, order, zeros, arrival, zeros)
        out = self.mod.run(arrays, self.keys, self.groups, n, 0, lim.max_num_batched_tokens,
                           lim.max_num_seqs, self.loop.shape.block_size,
                           lim.long_prefill_token_threshold, self.loop.pool.num_blocks,
                           lim.chunked_prefill, self.loop.sched.caching, self.loop.validate,
                           self.form, None, dis)
        return None if out is None else (state, out)

    def install(self, got: tuple[list[np.ndarray], tuple[Any, ...]]) -> SimulationResult:
        """The loop's state becomes a run's, and its result."""
        state, out = got
        for f, a in zip(_STATE, state, strict=True):
            setattr(self.loop.s, f, a)
        return core.package(self.loop, out)


def eligible(fleet: _Fleet) -> bool:
    """The fleets this module runs (see the module docstring)."""
    return len(fleet.dec) == 1 and (len(fleet.pre) == 1 or not fleet.least)


def run(fleet: _Fleet) -> DisaggResult | None:
    """The fleet's result from the compiled core, or None (the caller runs fleet.run())."""
    if not eligible(fleet):
        return None
    picked = [core.pick(loop) for loop in (*fleet.pre, *fleet.dec)]
    if any(p is None for p in picked):
        return None
    pre = [_Runner(loop, p) for loop, p in zip(fleet.pre, picked, strict=False) if p]
    dec = _Runner(fleet.dec[0], picked[-1])  # type: ignore[arg-type]
    ids = _route(fleet)
    for loop in (*fleet.pre, *fleet.dec):
        loop.s.status[list(fleet.rejected)] = REJECTED
    return _iterate(fleet, pre, dec, ids)


def _route(fleet: _Fleet) -> list[IntArray]:
    """Each prefill instance's requests in the order they reach it (round robin over the
    proxy's order, rejected requests skipped: fleet._route)."""
    order = np.array([r for r in fleet.order if r not in fleet.rejected], dtype=np.int64)
    x = len(fleet.pre)
    inst = np.arange(len(order)) % x
    fleet.p_of[order] = inst
    return [order[inst == p] for p in range(x)]


def _iterate(fleet: _Fleet, pre: list[_Runner], dec: _Runner,
             ids: list[IntArray]) -> DisaggResult | None:
    at = np.asarray(fleet.engine_at, dtype=np.float64)
    served = np.concatenate(ids)
    rel: FloatArray | None = None
    fin_prev: FloatArray | None = None
    d_got = None
    for _ in range(ROUNDS + 1):
        p_got = []
        for runner, mine in zip(pre, ids, strict=True):
            got = runner.run(mine, at[mine], None if rel is None else _releases(mine, rel))
            if got is None:
                return None
            p_got.append(got)
        fin = np.full(len(at), np.nan)
        for got, mine in zip(p_got, ids, strict=True):
            fin[mine] = got[0][_STATE.index("finish_s")][mine]
        if (d_got is not None and fin_prev is not None
                and np.array_equal(fin, fin_prev, equal_nan=True)):
            return _assemble(fleet, pre, dec, p_got, d_got, fin)
        d_got = _decode(fleet, dec, served, fin)
        rel, fin_prev = d_got[1][2], fin
    return None


def _releases(mine: IntArray, rel: FloatArray) -> tuple[str, FloatArray, IntArray]:
    """A prefill instance's releases in (time, request) order (PrefillLoop.releases' heap)."""
    k = np.lexsort((mine, rel[mine]))
    return "prefill", np.ascontiguousarray(rel[mine][k]), np.ascontiguousarray(mine[k])


def _decode(fleet: _Fleet, dec: _Runner, served: IntArray, fin: FloatArray
            ) -> tuple[Any, tuple[FloatArray, FloatArray, FloatArray, np.ndarray]]:
    """The decode instance fed the prefill finish times ``fin`` (arrivals after the API
    delay, in (time, request) order: DecodeLoop.inbox's heap); link: (admitted, transfer
    start, transfer end, starved) per request."""
    n = len(fin)
    t = fin[served] + fleet.d_delay[served]
    k = np.lexsort((served, t))
    cost = fleet.link.cost
    if dec.wire is None:  # the wire time of each request's KV (LinkQueues.schedule's)
        dec.wire = np.array([cost.wire_s(b) for b in fleet.nbytes.tolist()], dtype=np.float64)
    wire = dec.wire
    p_of = np.maximum(fleet.p_of, 0)
    link = (np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan),
            np.zeros(n, dtype=np.uint8))
    dis = ("decode", wire, p_of, float(cost.latency_s), np.zeros(len(fleet.pre)), *link)
    got = dec.run(served[k], t[k], dis)
    return got, link


def _assemble(fleet: _Fleet, pre: list[_Runner], dec: _Runner, p_got: list[Any],
              d_got: Any, fin: FloatArray) -> DisaggResult:
    """Install the runs on the fleet's loops and books; the fleet's result from them."""
    got, link = d_got
    pres = tuple(r.install(g) for r, g in zip(pre, p_got, strict=True))
    loop = dec.loop
    res = dec.install(got)
    loop.arrive_s = loop.s.sent_s.copy()
    loop.admit_s, fleet.t_start, fleet.t_end = link[0], link[1], link[2]
    loop.starved = link[3].astype(np.bool_)
    served = fleet.p_of >= 0
    fleet.d_of[served] = 0
    fleet.p_end[served] = fin[served]
    fleet.link.moved_bytes = int(fleet.nbytes[~np.isnan(link[2])].sum())
    return fleet.assemble(pres, (res,))
