"""Target mode's capacity search: the fewest replicas whose router shares meet the SLO.

A fleet of N replicas serves the whole trace at its own arrival times; the router splits it.
A probe at N simulates replicas' shares exactly as the router would send them (requests that
arrive together stay together in the trace, and the router spreads them), never one
replica's sample with its arrival times divided by a rate::

    round-robin      share k = requests k, k + N, k + 2N, ...   (arrival order)
    prefix-affinity  the router's own assignment (it sees prefixes, not latencies)
    least-outstanding  round-robin shares here: its assignment needs every replica's answer
                     times, so only the fleet verification routes it for real

A probe routes the trace's busiest stretch of ``sample`` x N consecutive requests (the
whole trace when shorter; the busiest, so the estimate errs towards more replicas), then
simulates the first m of its N shares, m = 1 (about ``sample`` requests whatever N) and
judges their union; while an SLO term's limit lies inside its 95 % sampling interval
(plan_noise) it doubles m, up to all N shares or ``NOISE_GROWTH`` x ``sample`` requests. The
fleet verification then replays the whole trace on every replica.

The search starts at the optimistic fleet (a lower bound: fewer replicas would each carry
more than the analytic capacity ceiling), doubles N (x4 while a term is over twice its
limit) until a probe passes, then narrows the bracket with secant steps on the margin
against the per-replica load 1/N until the failing and passing fleets are adjacent.
Per-replica load = target rate / N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvplan.analysis.plan.capacity_search import Probe, judged_probe
from kvplan.analysis.plan.fleet import Replica, prefix_affinity, round_robin, subset
from kvplan.analysis.plan.judge import Latencies, latencies, merge
from kvplan.sim.result import SimulationResult
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo

IntArray = npt.NDArray[np.int64]
NOISE_GROWTH = 4
"""A probe within sampling noise grows to at most this many times ``sample`` requests."""
GROWTH = 64
"""The search gives up past this many times the optimistic fleet (or +64 replicas)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareProbe:
    """N replicas' shares, ``shares`` of them simulated, and what their union gave."""

    replicas: int
    shares: int
    requests: int
    probe: Probe

    @property
    def ok(self) -> bool:
        return self.probe.verdict.ok


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaSearch:
    """``lo``: the smallest passing fleet found (None: none up to the cap); ``hi``: the
    largest failing one below it (None when the optimistic fleet already passed)."""

    lo: ShareProbe | None
    hi: ShareProbe | None
    probes: int
    sim_requests: int


def assignment(work: Workload, replicas: int, router: str) -> IntArray:
    """The replica of each request under ``router`` (least-outstanding: round-robin)."""
    if router == "prefix-affinity" and replicas > 1:
        return prefix_affinity(work, replicas)
    return round_robin(len(work), replicas)


def share_probe(rep: Replica, work: Workload, slo: Slo, replicas: int, sample: int,
                rate_rps: float) -> ShareProbe:
    """Simulate enough of the N shares for the verdict (see the module docstring)."""
    work = busiest(work, sample * replicas)
    assign = assignment(work, replicas, rep.deployment.router)
    per_share = len(work) / replicas
    m = min(replicas, max(1, math.ceil(sample / per_share)))
    top = min(replicas, max(m, math.ceil(NOISE_GROWTH * sample / per_share)))
    runs: list[tuple[SimulationResult, IntArray]] = []
    while True:
        for k in range(len(runs), m):
            ids = np.flatnonzero(assign == k).astype(np.int64)
            if len(ids):
                runs.append((rep.simulate(subset(work, ids)), ids))
        p = judged_probe([r for r, _ in runs], _pooled(runs, slo.judges_itl), rep, slo,
                         rate_rps / replicas)
        if not p.verdict.within_noise or m >= top:
            return ShareProbe(replicas=replicas, shares=m, probe=p,
                              requests=sum(len(ids) for _, ids in runs))
        m = min(top, 2 * m)


def busiest(work: Workload, size: int) -> Workload:
    """The ``size`` consecutive requests spanning the shortest time (ties: the earliest)."""
    if size >= len(work):
        return work
    span = work.arrival_s[size - 1:] - work.arrival_s[: len(work) - size + 1]
    start = int(np.argmin(span))
    return subset(work, np.arange(start, start + size, dtype=np.int64))


def _pooled(runs: list[tuple[SimulationResult, IntArray]], itl: bool) -> Latencies:
    """The simulated shares' latencies as one set (request ids renumbered 0..n-1)."""
    every = np.concatenate([ids for _, ids in runs])
    pos = np.empty(len(every), dtype=np.int64)
    pos[np.argsort(every, kind="stable")] = np.arange(len(every), dtype=np.int64)
    parts, start = [], 0
    for r, ids in runs:
        parts.append((latencies(r, itl=itl), pos[start:start + len(ids)]))
        start += len(ids)
    return merge(parts)


def find_replicas(rep: Replica, work: Workload, slo: Slo, *, floor: int, cap: int,
                  sample: int, rate_rps: float, fixed: int | None = None) -> ReplicaSearch:
    """The smallest N in [floor, cap] whose shares pass (``fixed``: that N, every share)."""
    tried: dict[int, ShareProbe] = {}

    def run(n: int) -> ShareProbe:
        if n not in tried:
            tried[n] = share_probe(rep, work, slo, n, len(work) if fixed else sample, rate_rps)
        return tried[n]

    if fixed is not None:
        p = run(fixed)
        return _result(p if p.ok else None, None if p.ok else p, tried)
    lo, hi = _double(run, floor, max(floor, cap))
    while lo is not None and hi is not None and lo.replicas - hi.replicas > 1:
        p = run(_secant(lo, hi))
        lo, hi = (p, hi) if p.ok else (lo, p)
    return _result(lo, hi, tried)


def _double(run: object, floor: int, cap: int) -> tuple[ShareProbe | None, ShareProbe | None]:
    """(first passing, last failing) along floor, x2 (x4 while a term is over twice its
    limit), ..., cap."""
    assert callable(run)
    n, hi = floor, None
    while True:
        p: ShareProbe = run(n)
        if p.ok:
            return p, hi
        if n >= cap:
            return None, p
        hi, n = p, min(cap, (4 if p.probe.verdict.margin < -1 else 2) * n)


def _secant(lo: ShareProbe, hi: ShareProbe) -> int:
    """The fleet where the margin line (in per-replica load 1/N) crosses 0, strictly inside
    the bracket (hi.replicas, lo.replicas)."""
    a, b = 1 / hi.replicas, 1 / lo.replicas
    ma, mb = max(hi.probe.verdict.margin, -1.0), lo.probe.verdict.margin
    x = b + (a - b) * mb / (mb - ma) if mb > ma else (a + b) / 2
    n = math.ceil(1 / x) if x > 0 else lo.replicas - 1
    return min(max(n, hi.replicas + 1), lo.replicas - 1)


def _result(lo: ShareProbe | None, hi: ShareProbe | None, tried: dict[int, ShareProbe]
            ) -> ReplicaSearch:
    return ReplicaSearch(lo=lo, hi=hi, probes=len(tried),
                         sim_requests=sum(p.requests for p in tried.values()))


def replica_cap(floor: int, requests: int, max_replicas: int | None) -> int:
    """The largest fleet the search tries: GROWTH x the optimistic one (at least +64), no
    more replicas than requests, and within --max-gpus."""
    cap = min(max(floor * GROWTH, floor + 64), max(1, requests))
    if max_replicas is not None:
        cap = min(cap, max_replicas)
    return max(floor, cap)
