"""A fleet: N replicas behind a router, each simulated on the arrivals routed to it.

Routers assign every arrival from what a real router sees at that moment:

* ``round-robin``: arrival i goes to replica i mod N;
* ``least-outstanding``: to the replica with the fewest requests sent and not yet answered
  (ties: lowest index). Answer times come from a first round-robin pass (each request's
  simulated latency there), so the router sees service times the simulator produced;
* ``prefix-affinity``: cache-aware, as SGLang's router — the replica already holding the
  longest run of the request's leading prefix blocks (more than CACHE_THRESHOLD of them,
  else the replica caching least), by load while the fleet is BALANCE_REQUESTS requests
  out of balance; needs a trace with prefix ids.

The fleet is verified by simulating every replica on its share; one replica's throughput
is never multiplied.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvplan.analysis.plan.judge import Latencies, Verdict, judge, latencies, merge
from kvplan.analysis.serving import pick_profile, scheduler_limits
from kvplan.costs.memory.plan import MemoryPlan, plan_deployment
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.roofline import StepCostModel
from kvplan.errors import InputError
from kvplan.memo import Memo
from kvplan.sim.dp.lockstep import RankSim
from kvplan.sim.result import SimulationResult
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetRun:
    """A simulated fleet: its SLO verdict and the counters the explanation reads."""

    replicas: int
    verdict: Verdict
    latencies: Latencies
    requests: int
    output_tokens: int
    duration_s: float
    peak_kv_usage: float
    preemptions: int
    requests_per_replica: tuple[int, ...]


class Replica:
    """One replica's memory plan, scheduler limits and step timer, built once, reused."""

    def __init__(self, d: Deployment, profile: str | None = None, *,
                 picked: Profile | None = None) -> None:
        """``picked``: the latency profile ``profile`` names for ``d``, if already picked."""
        self.deployment = d
        self.plan: MemoryPlan = plan_deployment(d)
        self.limits = scheduler_limits(self.plan.settings, d.engine)
        prof = picked or pick_profile(d.model, d.gpu, d.engine, profile)
        self.timer = StepCostModel(d.model, d.gpu, d.engine, prof)
        self.ranks = d.engine.data_parallel_size
        """DP engines of one replica (> 1: the lockstep group, parallel/replica.py)."""
        self.rank_sim: RankSim | None = None
        if self.ranks > 1:
            from kvplan.analysis.dp_serving import dp_rank_sim

            self.rank_sim = dp_rank_sim(d.model, d.gpu, d.engine, self.plan, self.limits, prof)
            assert isinstance(self.rank_sim.timer, StepCostModel)
            self.timer = self.rank_sim.timer  # the same timer the lockstep ranks price with

    def simulate(self, work: Workload) -> SimulationResult:
        from kvplan.sim.blocks import kv_shape_from_groups
        from kvplan.sim.simulator import simulate

        if self.rank_sim is not None:
            from kvplan.analysis.plan.parallel.replica import simulate_group

            return simulate_group(self.rank_sim, work)

        return simulate(work, timer=self.timer, num_blocks=self.plan.num_blocks,
                        block_size=self.plan.block_size, engine=self.deployment.engine,
                        kv=kv_shape_from_groups(self.plan.groups, self.plan.block_size),
                        limits=self.limits, max_model_len=self.plan.settings.max_model_len)


_REPLICAS: Memo[Replica] = Memo(512)
"""Replicas per (model, GPU, engine, router, replicas, latency profile): all they read."""


def replica(d: Deployment, profile: str | None = None) -> Replica:
    """``Replica(d, profile)``, built once: a plan screens, capacity-searches and verifies
    the same replica, and its worker processes (forked after screening) find the replicas
    screening built. Keyed by the picked profile's values, so a profile file rewritten
    between plans is read afresh (the profile is picked on every call)."""
    picked = pick_profile(d.model, d.gpu, d.engine, profile)
    key = (d.model, _gpu_key(d.gpu), d.engine, d.router, d.replicas, picked)
    return _REPLICAS.get(key, lambda: Replica(d, profile, picked=picked))


def _gpu_key(g: HardwareSpec) -> tuple[object, ...]:
    """A hashable stand-in for every field of ``g`` (its FLOP/s table is a dict)."""
    return tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v
                 for v in (getattr(g, f) for f in g.__dataclass_fields__))


def subset(w: Workload, ids: IntArray, name: str | None = None) -> Workload:
    """The requests ``ids`` of ``w`` (arrival order kept) as a workload of their own."""
    hashes = None if w.prefix_hashes is None else tuple(w.prefix_hashes[i] for i in ids)
    return Workload(name=name or w.name, arrival_s=w.arrival_s[ids],
                    prompt_tokens=w.prompt_tokens[ids], output_tokens=w.output_tokens[ids],
                    prefix_hashes=hashes, hash_block_tokens=w.hash_block_tokens if hashes else 0)


def round_robin(n: int, replicas: int) -> IntArray:
    return np.arange(n, dtype=np.int64) % replicas


def least_outstanding(arrival_s: npt.NDArray[np.float64], answer_s: npt.NDArray[np.float64],
                      replicas: int) -> IntArray:
    """Join the replica with the fewest outstanding requests (answered at ``answer_s``)."""
    pending: list[list[float]] = [[] for _ in range(replicas)]
    out = np.zeros(len(arrival_s), dtype=np.int64)
    for i, t in enumerate(arrival_s.tolist()):
        for heap in pending:
            while heap and heap[0] <= t:
                heapq.heappop(heap)
        k = min(range(replicas), key=lambda j: (len(pending[j]), j))
        out[i] = k
        heapq.heappush(pending[k], t + float(answer_s[i]))
    return out


BALANCE_REQUESTS = 32
"""prefix-affinity routes by load while the fleet is imbalanced: the busiest replica has more
than this many requests over the least-loaded one (and more than 1.0001 x its count; SGLang's
cache-aware router: balance_abs_threshold 32, balance_rel_threshold 1.0001)."""
CACHE_THRESHOLD = 0.5
"""A cache match is followed only above this share of the request's prefix blocks; below it
the request goes to the replica caching least (SGLang's router: cache_threshold 0.5, "the
worker with the smallest tree")."""


def prefix_affinity(w: Workload, replicas: int) -> IntArray:
    """Cache-aware routing, as SGLang's router: while the fleet is imbalanced
    (``BALANCE_REQUESTS``) the replica with the fewest requests so far; else the replica
    holding the longest run of the request's leading prefix blocks when that run is more
    than ``CACHE_THRESHOLD`` of its blocks, otherwise the replica caching the fewest blocks
    (ties: fewest requests, then the lowest index)."""
    if w.prefix_hashes is None:
        raise InputError("--router prefix-affinity needs a trace with prefix ids "
                         "(hash_ids); use round-robin or least-outstanding")
    seen: list[set[int]] = [set() for _ in range(replicas)]
    count = [0] * replicas
    out = np.zeros(len(w), dtype=np.int64)
    for i, h in enumerate(w.prefix_hashes):
        blocks = h.tolist()
        lo, hi = min(count), max(count)
        if hi - lo > BALANCE_REQUESTS and hi > 1.0001 * lo:
            k = min(range(replicas), key=lambda r: (count[r], r))
        else:
            k = max(range(replicas), key=lambda r: (_matched(blocks, seen[r]), -count[r], -r))
            if _matched(blocks, seen[k]) <= CACHE_THRESHOLD * len(blocks):
                k = min(range(replicas), key=lambda r: (len(seen[r]), count[r], r))
        seen[k].update(blocks)
        count[k] += 1
        out[i] = k
    return out


def _matched(blocks: list[int], seen: set[int]) -> int:
    """Leading blocks of a request already cached on a replica (prefix ids name prefixes)."""
    n = 0
    for b in blocks:
        if b not in seen:
            break
        n += 1
    return n


def simulate_fleet(replica: Replica, work: Workload, replicas: int, slo: Slo) -> FleetRun:
    """Route ``work`` over ``replicas`` copies of ``replica``, simulate each, judge the union."""
    assign = fleet_assignment(replica, work, replicas)
    if assign is None:  # least-outstanding: answer times from a round-robin pass first
        first = _run(replica, work, round_robin(len(work), replicas), replicas, False)
        e2e = np.minimum(merge_parts(first).e2el_ms, 1e9) / 1000
        assign = least_outstanding(work.arrival_s, e2e, replicas)
    return fleet_from_parts(_run(replica, work, assign, replicas, slo.judges_itl), work,
                            replicas, slo)


def fleet_assignment(replica: Replica, work: Workload, replicas: int) -> IntArray | None:
    """Each arrival's replica where the router fixes it up front; None where it needs a
    first pass's answer times (least-outstanding over several replicas)."""
    router = replica.deployment.router
    if router == "least-outstanding" and replicas > 1:
        return None
    if router == "prefix-affinity":
        return prefix_affinity(work, replicas)
    return round_robin(len(work), replicas)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaPart:
    """One replica's share of a fleet run: what the fleet's verdict and counters read."""

    index: int
    ids: IntArray
    latencies: Latencies
    output_tokens: int
    last_finish_s: float | None
    peak_kv_usage: float
    preemptions: int


def replica_part(replica: Replica, work: Workload, assign: IntArray, k: int,
                 itl: bool) -> ReplicaPart | None:
    """Replica ``k``'s share simulated (None when the router sent it nothing)."""
    ids = np.flatnonzero(assign == k).astype(np.int64)
    if not len(ids):
        return None
    r = replica.simulate(subset(work, ids))
    return ReplicaPart(index=k, ids=ids, latencies=latencies(r, itl=itl),
                       output_tokens=int(r.output_tokens[r.finished].sum()),
                       last_finish_s=float(r.finish_s[r.finished].max())
                       if r.finished.any() else None,
                       peak_kv_usage=r.peak_kv_blocks / max(1, r.usable_blocks),
                       preemptions=r.total_preemptions)


def _run(replica: Replica, work: Workload, assign: IntArray, replicas: int, itl: bool
         ) -> list[ReplicaPart]:
    parts = (replica_part(replica, work, assign, k, itl) for k in range(replicas))
    return [p for p in parts if p is not None]


def merge_parts(parts: list[ReplicaPart]) -> Latencies:
    return merge([(p.latencies, p.ids) for p in parts])


def fleet_from_parts(parts: list[ReplicaPart], work: Workload, replicas: int,
                     slo: Slo) -> FleetRun:
    """The fleet's verdict on the union of its replicas' latencies, and its counters (a
    replica the router sent nothing has no part)."""
    lat = merge_parts(parts)
    ends = [p.last_finish_s for p in parts if p.last_finish_s is not None]
    routed = [0] * replicas
    for p in parts:
        routed[p.index] = len(p.ids)
    return FleetRun(replicas=replicas, verdict=judge(lat, slo), latencies=lat,
                    requests=len(work), output_tokens=sum(p.output_tokens for p in parts),
                    duration_s=max(ends, default=0.0),
                    peak_kv_usage=max((p.peak_kv_usage for p in parts), default=0.0),
                    preemptions=sum(p.preemptions for p in parts),
                    requests_per_replica=tuple(routed))
