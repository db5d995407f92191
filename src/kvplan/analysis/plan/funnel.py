"""The funnel: enumerate -> memory -> bounds -> simulate best-first -> verify the fleet.

A candidate is dropped only when it provably cannot win: it does not fit (exact memory
plan), its zero-load latencies already break the SLO, its optimistic fleet breaks
--max-gpus / --max-cost-per-hour, or its optimistic cost is not below the best verified
cost. ``exhaustive`` simulates every memory-feasible candidate instead (capacity mode:
every one whose single replica, priced exactly, keeps to the budget).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kvplan.analysis.plan.bounds import Bounds, bounds
from kvplan.analysis.plan.executor import Executor, run_fleet_jobs
from kvplan.analysis.plan.fleet import Replica, replica
from kvplan.analysis.plan.jobs import CapacityJob, CapacityOut, FleetJob, FleetOut, JobContext
from kvplan.analysis.plan.records import Candidate, FleetInfo
from kvplan.analysis.plan.shares import replica_cap
from kvplan.analysis.plan.space import SearchSpace, enumerate_space
from kvplan.costs.pricing import FleetCost, filled_cost, fleet_cost
from kvplan.errors import DoesNotFitError, KvplanError
from kvplan.specs.deployment import Deployment
from kvplan.specs.model import ModelSpec
from kvplan.specs.prices import PriceRow, PriceTable
from kvplan.units import counted

ROUND = 4
"""Candidates simulated per round: fixed, so the plan does not depend on the worker count."""
GUESS_SHARE = 0.5
"""First capacity probe: this share of the optimistic ceiling (or the needed per-replica rate)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What the search is asked to respect."""

    rate_rps: float | None
    replicas: int | None
    max_gpus: int | None
    max_cost_per_hour: float | None
    mean_output_tokens: float
    exhaustive: bool
    target_requests: int = 0
    """Requests in the fleet's trace (target mode): no fleet has more replicas than that."""

    def max_replicas(self, gpus_per_replica: int) -> int | None:
        """The most replicas --max-gpus allows (None: no limit)."""
        return None if self.max_gpus is None else self.max_gpus // gpus_per_replica


class Tally:
    """Counts of work done during one search (an accumulator the search report reads)."""

    __slots__ = ("capacity_searches", "fleet_simulations", "probes", "sim_requests")

    def __init__(self) -> None:
        self.capacity_searches = 0
        self.fleet_simulations = 0
        self.probes = 0
        self.sim_requests = 0


Progress = Callable[[str, int, int], None]


def screen(model: ModelSpec, space: SearchSpace, router: str, prices: PriceTable,
           ctx: JobContext, lim: Limits) -> list[Candidate]:
    """Stages 0-2 for every combination: enumerate, exact memory, analytic bounds (here, so
    the worker processes forked after it find every replica and table it built)."""
    out = []
    seen: dict[tuple[str, object], str] = {}
    for i, (d, why, flags) in enumerate(enumerate_space(model, space, router)):
        cid = f"c{i:04d}"
        if d is None:
            out.append(_dummy(cid, model, space, why, flags))
            continue
        first = seen.setdefault((d.gpu.id, d.engine), cid)
        if first != cid:
            out.append(Candidate(id=cid, deployment=d, stage="duplicate", reason=(
                f"the same engine flags as {first} once vLLM's defaults (and the block size "
                "an MLA backend forces) are filled in")))
            continue
        out.append(_screen_one(cid, d, prices, ctx, lim))
    return out


def _dummy(cid: str, model: ModelSpec, space: SearchSpace, why: str,
           flags: dict[str, object]) -> Candidate:
    """A combination vLLM refuses for this model, recorded with its own GPU and flags (the
    JSON's candidate row names what was refused; vLLM's defaults where a flag cannot be
    set)."""
    from kvplan.specs.serving import EngineConfig

    gpu = next((g for g in space.gpus if g.id == flags["gpu"]), space.gpus[0])
    given: dict[str, Any] = {k: v for k, v in flags.items() if k != "gpu" and v is not None}
    try:
        engine = EngineConfig(**given, gpu_memory_utilization=space.gpu_memory_utilization,
                              max_model_len=space.max_model_len or None)
    except KvplanError:
        engine = EngineConfig()
    d = Deployment(model=model, gpu=gpu, engine=engine)
    return Candidate(id=cid, deployment=d, stage="invalid", reason=why)


def _screen_one(cid: str, d: Deployment, prices: PriceTable, ctx: JobContext,
                lim: Limits) -> Candidate:
    try:
        rep = replica(d, ctx.profile)
    except DoesNotFitError as exc:
        return Candidate(id=cid, deployment=d, stage="pruned_memory", reason=str(exc))
    except KvplanError as exc:
        return Candidate(id=cid, deployment=d, stage="invalid", reason=str(exc))
    b = bounds(rep, ctx.bounds_work, ctx.slo_for(d))
    c = Candidate(id=cid, deployment=d, stage="screened", reason="",
                  kv_cache_tokens=rep.plan.kv_cache_tokens, ceilings_rps=b.ceilings_rps,
                  zero_load_margins=b.zero_load.margins)
    if not b.zero_load.ok and not lim.exhaustive:
        key = b.zero_load.binding
        return replace(c, stage="pruned_bound", reason=(
            f"at zero load {key} is already {b.zero_load.value(key):.1f}"
            f"{'' if key == 'goodput_share' else ' ms'}, over the SLO{_api_part(rep, key)}"))
    return _optimistic(c, b, prices, lim)


def _api_part(rep: Replica, key: str) -> str:
    """How much of a zero-load TTFT / E2EL is the API server's fixed path (a fitted profile
    term, not the GPU's): '' where it has none or the term is another."""
    api = getattr(rep.timer, "profile", None)
    ms = 1000 * api.api_request_s if api is not None else 0.0
    if ms <= 0 or not ("ttft" in key or "e2el" in key):
        return ""
    return (f" (the API server's path alone is {ms:.1f} ms, a fitted profile term: "
            "kvplan calibrate fits your own)")


def optimistic_replicas(b: Bounds, lim: Limits) -> int:
    """The optimistic fleet: --replicas, else the fewest replicas the trace's deadline
    windows allow (``window``: the steady-state ceilings bound no finite trace — 200
    requests in 2 s under e2el:p99:600000 asked for 7 L40S where 1 serves them), at most
    one replica per request of the trace (more give each at most one request, as that many
    do: 10 requests at 1e9 req/s asked for 2.3e7 replicas, and hung)."""
    if lim.rate_rps is None:
        return 1
    if lim.replicas:
        return lim.replicas
    n = max(1, b.window_replicas)
    return min(n, lim.target_requests) if lim.target_requests else n


def unit_cost(rows: tuple[PriceRow, ...], n: int, gpus_per_replica: int, lim: Limits
              ) -> FleetCost | None:
    """Target mode: ``n`` replicas on the cheapest shape. Capacity mode: one rented unit
    filled with replicas (``pricing.filled_cost``; within --max-gpus and, where a unit
    can, --max-cost-per-hour), each at capacity."""
    if lim.rate_rps is not None:
        return fleet_cost(rows, n, gpus_per_replica)
    return filled_cost(rows, gpus_per_replica, lim.max_replicas(gpus_per_replica),
                       lim.max_cost_per_hour)


def _optimistic(c: Candidate, b: Bounds, prices: PriceTable, lim: Limits) -> Candidate:
    d = c.deployment
    rows = prices.for_gpu(d.gpu.id)
    n = optimistic_replicas(b, lim)
    cost = unit_cost(rows, n, d.gpus_per_replica, lim)
    if cost is None:
        return replace(c, stage="pruned_cost", reason=(
            f"no {prices.provider} instance holds a {d.gpus_per_replica}-GPU replica of "
            f"{d.gpu.id}"))
    n = cost.replicas
    c = replace(c, optimistic_replicas=n, optimistic_usd_per_hour=cost.usd_per_hour)
    if lim.exhaustive and lim.rate_rps is not None:
        # capacity mode prices exactly one replica: its budget check is exact, not a bound,
        # so exhaustive applies it too (it has no later fleet check that would)
        return c
    if lim.replicas is not None and lim.rate_rps is not None and b.window_replicas > n:
        return replace(c, stage="pruned_bound", reason=(
            f"--replicas {n} cannot serve the trace: {b.window_why} needs at least "
            f"{counted(b.window_replicas, 'replica')} for the work of the requests that must "
            "meet it"))
    return _limits_check(c, n, cost.usd_per_hour, lim)


def _limits_check(c: Candidate, n: int, usd: float, lim: Limits) -> Candidate:
    gpus = n * c.deployment.gpus_per_replica
    if lim.max_gpus is not None and gpus > lim.max_gpus:
        return replace(c, stage="pruned_bound", reason=(
            f"needs at least {counted(n, 'replica')} = {counted(gpus, 'GPU')} > "
            f"--max-gpus {lim.max_gpus}"))
    if lim.max_cost_per_hour is not None and usd > lim.max_cost_per_hour:
        return replace(c, stage="pruned_bound", reason=(
            f"costs at least ${usd:.2f}/h > --max-cost-per-hour {lim.max_cost_per_hour}"))
    return c


def order_key(c: Candidate, lim: Limits) -> float:
    """Optimistic cost: $/hour of the smallest fleet (target) or $/M output tokens (capacity)."""
    assert c.optimistic_usd_per_hour is not None
    if lim.rate_rps is not None:
        return c.optimistic_usd_per_hour
    opt = min(v for _, v in c.ceilings_rps) * (c.optimistic_replicas or 1)
    return usd_per_mtok(c.optimistic_usd_per_hour, opt, lim.mean_output_tokens)


def usd_per_mtok(usd_per_hour: float, rate_rps: float, mean_output_tokens: float) -> float:
    """$ per million output tokens when serving ``rate_rps`` requests/s."""
    tokens_per_hour = rate_rps * mean_output_tokens * 3600
    return usd_per_hour / tokens_per_hour * 1e6 if tokens_per_hour > 0 else math.inf


def capacity_job(c: Candidate, lim: Limits) -> CapacityJob:
    """Capacity mode: the rate search from half the optimistic ceiling. Target mode: the
    replica search from the optimistic fleet (plan_shares)."""
    opt = min(v for _, v in c.ceilings_rps)
    guess = GUESS_SHARE * opt
    floor = c.optimistic_replicas or 1
    steady = floor
    if lim.rate_rps is not None:
        guess = min(opt, lim.rate_rps / floor)
        # the search's reach: GROWTH x the steady-state estimate, not x the deadline floor
        # (a p90 term's floor may be 1 where 200 replicas are needed)
        steady = max(floor, math.ceil(lim.rate_rps / opt))
    return CapacityJob(deployment=c.deployment, guess_rps=guess, ceiling_rps=opt,
                       target_rps=None if lim.replicas is not None else lim.rate_rps,
                       floor_replicas=floor, fixed_replicas=lim.replicas,
                       cap_replicas=max(floor, replica_cap(
                           steady, lim.target_requests,
                           lim.max_replicas(c.deployment.gpus_per_replica))))


def fleet_jobs(c: Candidate, sizes: list[int]) -> list[FleetJob]:
    return [FleetJob(deployment=c.deployment, replicas=n) for n in sizes]


def tally(t: Tally, outs: list[CapacityOut] | list[FleetOut]) -> None:
    for o in outs:
        t.sim_requests += o.sim_requests
        if isinstance(o, CapacityOut):
            t.capacity_searches += 1
            t.probes += o.info.probes
        else:
            t.fleet_simulations += 1


def run_capacity(ex: Executor, ctx: JobContext, cands: list[Candidate], lim: Limits,
                 t: Tally) -> list[CapacityOut]:
    outs = ex.run(ctx, [capacity_job(c, lim) for c in cands])
    caps = [o for o in outs if isinstance(o, CapacityOut)]
    tally(t, caps)
    return caps


def run_fleets(ex: Executor, ctx: JobContext, c: Candidate, sizes: list[int],
               t: Tally) -> dict[int, FleetInfo]:
    outs = run_fleet_jobs(ex, ctx, fleet_jobs(c, sizes))
    tally(t, outs)
    return {o.info.replicas: o.info for o in outs}
