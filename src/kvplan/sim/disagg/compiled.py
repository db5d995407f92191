"""The disaggregated fleet on the compiled core: each instance runs whole in C, pool by pool,
and the pools' coupling is iterated to its fixed point.

Pools meet at two points: a prefill instance's finish times are the decode instances'
arrivals, and the decode instances' transfer ends are when the prefill instances free the
requests' blocks. So::

    P_0     = each prefill instance run with blocks freed as requests finish (a guess)
    D_k     = the decode instances fed P_k's finishes (the proxy's round robin over them in
              the order they end; the link inside their joint run) -> R_k+1, every
              transfer's end
    P_k+1   = each prefill instance with its blocks released at R_k+1
    stop when P_k+1's finishes (times and decode instances) equal P_k's: D_k is then what
    the decode instances do fed P_k+1, and (P_k+1, D_k) is consistent

A consistent pair is the fleet's trajectory: every event follows its causes by a positive
time (a step takes time; a transfer ends after its admission), so two consistent pairs agree
event by event from the first (docs/disaggregation.md, "The compiled fleet"). Where a round
does not reach it (a release falls due before its request finished, or ``ROUNDS`` pass: the
prefill pool ran out of blocks), the caller runs the Python fleet (fleet.py), the reference
this is tested against to the bit (tests/test_disagg_compiled.py).

The decode instances run together, in one call (``_core_fleet.h``): they share the prefill
instances' egress NICs (link.py), so each takes its loop's passes in the fleet's order (the
earliest clock first, ties to the lowest index) over one egress array.

Covered: round-robin routing (the proxy's choices are then known from the prefill runs),
or one instance on each side (least-outstanding has nothing to choose). Least-outstanding
over several instances runs the Python fleet.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol

import numpy as np

from kvplan.sim import core
from kvplan.sim.disagg.link import NIXL_ABORT_REQUEST_TIMEOUT_S, LinkQueues
from kvplan.sim.disagg.result import DisaggResult
from kvplan.sim.result import FloatArray, IntArray, KvSeries, SimulationResult
from kvplan.sim.state import REJECTED


class _Fleet(Protocol):
    """What this module reads from and writes to fleet._Fleet (a protocol: fleet.py imports
    this module)."""

    pre: list[Any]
    dec: list[Any]
    least: bool
    rejected: dict[int, str]
    late: frozenset[int]
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

    def assemble(self, pre: tuple[SimulationResult, ...], dec: tuple[SimulationResult, ...],
                 steps: KvSeries | None = None) -> DisaggResult: ...

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

    def args(self, ids: IntArray, at: FloatArray, dis: tuple[Any, ...] | None
             ) -> tuple[list[np.ndarray], tuple[Any, ...]]:
        """A run's fresh state and the core's arguments: requests ``ids`` reach the instance
        at ``at`` (in that order)."""
        s, lim, n = self.loop.s, self.loop.limits, self.n
        state = [getattr(s, f).copy() for f in _STATE]
        arrival = np.full(n, np.inf)
        arrival[:len(ids)] = at
        order = np.zeros(n, dtype=np.int64)
        order[:len(ids)] = ids
        zeros = np.zeros(n)
        arrays = (arrival, np.ascontiguousarray(s.prompt), np.ascontiguousarray(s.output),
                  np.zeros(n, dtype=np.uint8), *state, order, zeros, arrival, zeros)
        return state, (arrays, self.keys, self.groups, n, 0, core.token_budget(self.loop),
                       lim.max_num_seqs, self.loop.shape.block_size,
                       lim.long_prefill_token_threshold, self.loop.pool.num_blocks,
                       lim.chunked_prefill, self.loop.sched.caching, self.loop.validate,
                       self.form, None, dis)

    def run(self, ids: IntArray, at: FloatArray, dis: tuple[Any, ...] | None
            ) -> tuple[list[np.ndarray], tuple[Any, ...]] | None:
        """One run alone (see ``args``); None if the core gave up on a release guess."""
        state, args = self.args(ids, at, dis)
        out = self.mod.run(*args)
        return None if out is None else (state, out)

    def install(self, got: tuple[list[np.ndarray], tuple[Any, ...]]) -> SimulationResult:
        """The loop's state becomes a run's, and its result."""
        state, out = got
        for f, a in zip(_STATE, state, strict=True):
            setattr(self.loop.s, f, a)
        return core.package(self.loop, out)


def eligible(fleet: _Fleet) -> bool:
    """The fleets this module runs (see the module docstring)."""
    return not fleet.least or (len(fleet.pre) == 1 and len(fleet.dec) == 1)


def run(fleet: _Fleet) -> DisaggResult | None:
    """The fleet's result from the compiled core, or None (the caller runs fleet.run())."""
    if not eligible(fleet):
        return None
    loops = (*fleet.pre, *fleet.dec)
    picked = [core.pick(loop) for loop in loops]
    runners = [_Runner(loop, p) for loop, p in zip(loops, picked, strict=True) if p]
    if len(runners) < len(loops):
        return None
    ids = _route(fleet)
    for loop in loops:  # a request refused by decode only runs its prefill (fleet._route)
        gone = fleet.rejected if loop in fleet.dec else set(fleet.rejected) - fleet.late
        loop.s.status[list(gone)] = REJECTED
    x = len(fleet.pre)
    return _iterate(fleet, runners[:x], runners[x:], ids)


def _route(fleet: _Fleet) -> list[IntArray]:
    """Each prefill instance's requests in the order they reach it, by (time, request) as
    PrefillLoop.inbox's heap (round robin over the proxy's order; a rejected request takes
    its turn and is not sent: fleet._route)."""
    order = np.array(fleet.order, dtype=np.int64)
    x = len(fleet.pre)
    inst = np.arange(len(order)) % x
    sent = np.array([r not in fleet.rejected or r in fleet.late for r in fleet.order],
                    dtype=np.bool_)
    order, inst = order[sent], inst[sent]
    fleet.p_of[order] = inst
    at = np.asarray(fleet.engine_at, dtype=np.float64)
    mine = [order[inst == p] for p in range(x)]
    return [m[np.lexsort((m, at[m]))] for m in mine]


def _iterate(fleet: _Fleet, pre: list[_Runner], dec: list[_Runner],
             ids: list[IntArray]) -> DisaggResult | None:
    at = np.asarray(fleet.engine_at, dtype=np.float64)
    served = np.concatenate(ids)
    late = np.fromiter(fleet.late, dtype=np.int64, count=len(fleet.late))
    rel: FloatArray | None = None
    seen: tuple[FloatArray, IntArray] | None = None
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
        d_of = _decode_of(p_got, served, len(dec), fin)
        if d_of is None:
            return None
        if (d_got is not None and seen is not None
                and np.array_equal(fin, seen[0], equal_nan=True)
                and np.array_equal(d_of, seen[1])):
            return _assemble(fleet, pre, dec, p_got, d_got, (fin, d_of))
        d_got = _decode(fleet, dec, served[~np.isin(served, late)], fin, d_of)
        rel, seen = d_got[1][2].copy(), (fin, d_of)
        rel[late] = fin[late] + NIXL_ABORT_REQUEST_TIMEOUT_S  # no decode side reads them
    return None


def _releases(mine: IntArray, rel: FloatArray) -> tuple[str, FloatArray, IntArray]:
    """A prefill instance's releases in (time, request) order (PrefillLoop.releases' heap)."""
    k = np.lexsort((mine, rel[mine]))
    return "prefill", np.ascontiguousarray(rel[mine][k]), np.ascontiguousarray(mine[k])


def _decode_of(p_got: list[Any], served: IntArray, y: int, fin: FloatArray
               ) -> IntArray | None:
    """Each request's decode instance (-1: none): the proxy's round robin over the prefill
    answers in the order they come back (fleet._route_answers): by finish time, then the
    prefill instance, then the finishing step's plan order, the order its requests'
    emission runs close (the result's seg_req; an instance's steps end at distinct times,
    so the run's place in seg_req orders one step's finishes). None if a served request
    did not finish exactly once (the caller runs Python)."""
    d_of = np.full(len(fin), -1, dtype=np.int64)
    if y == 1:
        d_of[served] = 0
        return d_of
    parts = []
    for p, (_, out) in enumerate(p_got):
        req = np.frombuffer(out[7], dtype=np.int64)
        parts.append((np.full(len(req), p), np.arange(len(req)), req))
    inst, place, req = (np.concatenate(c) for c in zip(*parts, strict=True))
    if len(req) != len(served) or not np.array_equal(np.sort(req), np.sort(served)):
        return None
    d_of[req[np.lexsort((place, inst, fin[req]))]] = np.arange(len(req)) % y
    return d_of


def _decode(fleet: _Fleet, dec: list[_Runner], served: IntArray, fin: FloatArray,
            d_of: IntArray) -> tuple[list[Any], tuple[FloatArray, FloatArray, FloatArray,
                                                      np.ndarray], KvSeries]:
    """The decode instances fed the prefill finish times ``fin``, each its requests
    (``d_of``) after the API delay in (time, request) order (DecodeLoop.inbox's heap), run
    together on one link; link: (admitted, transfer start, transfer end, starved) per
    request; their step series joined (the client's, result.client_view)."""
    n = len(fin)
    cost = fleet.link.cost
    link = (np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan),
            np.zeros(n, dtype=np.uint8))
    dis = ("decode", _wire(fleet, dec[0]), np.maximum(fleet.p_of, 0), float(cost.latency_s),
           np.zeros(len(fleet.pre)), *link)  # one egress array: the instances share the NICs
    states, args = [], []
    for d, runner in enumerate(dec):
        mine = served[d_of[served] == d]
        t = fin[mine] + fleet.d_delay[mine]
        k = np.lexsort((mine, t))
        state, a = runner.args(mine[k], t[k], dis)
        states.append(state)
        args.append(a)
    outs, joined = dec[0].mod.run_decodes(args)
    return list(zip(states, outs, strict=True)), link, core.series(joined)


def _wire(fleet: _Fleet, runner: _Runner) -> FloatArray:
    """The wire time of each request's KV (LinkQueues.schedule's), computed once."""
    if runner.wire is None:
        runner.wire = fleet.link.cost.wire_s_each(fleet.nbytes)
    return runner.wire


def _assemble(fleet: _Fleet, pre: list[_Runner], dec: list[_Runner], p_got: list[Any],
              d_got: Any, fin_d: tuple[FloatArray, IntArray]) -> DisaggResult:
    """Install the runs on the fleet's loops and books; the fleet's result from them."""
    got, link, steps = d_got
    fin, d_of = fin_d
    pres = tuple(r.install(g) for r, g in zip(pre, p_got, strict=True))
    decs = []
    for d, (runner, g) in enumerate(zip(dec, got, strict=True)):
        loop, mine = runner.loop, d_of == d
        decs.append(runner.install(g))
        loop.arrive_s = loop.s.sent_s.copy()
        loop.admit_s = np.where(mine, link[0], np.nan)
        loop.starved = link[3].astype(np.bool_) & mine
    fleet.t_start, fleet.t_end = link[1], link[2]
    served = fleet.p_of >= 0
    fleet.d_of[served] = d_of[served]
    fleet.d_of[list(fleet.late)] = -1  # its decode turn taken, the request refused there
    fleet.p_end[served] = fin[served]
    fleet.link.moved_bytes = int(fleet.nbytes[~np.isnan(link[2])].sum())
    return fleet.assemble(pres, tuple(decs), steps)
