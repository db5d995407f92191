"""One-lever what-ifs on the winner, each searched and verified the way the winner was.

Target mode: each variant runs the funnel's own steps — the replica search on the router's
shares from its optimistic fleet, then the whole-fleet verification — and its binding term
is also simulated with the winner's fleet size on the whole trace, so every row reads
against the first row, which *is* the verified winner (its replicas, $/hour, per-replica
load and binding term). Capacity mode: the rate search on the unit stream, one probe at the
winner's capacity rate; the first row is the winner's own search. A variant that cannot be
built says why: it does not fit, or its replica spans more GPUs than one node holds.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.analysis.plan.bounds import bounds
from kvplan.analysis.plan.executor import Executor, run_fleet_jobs
from kvplan.analysis.plan.fleet import replica
from kvplan.analysis.plan.funnel import Limits, Tally, optimistic_replicas, run_capacity, tally
from kvplan.analysis.plan.jobs import CapacityJob, CapacityOut, FleetJob, JobContext
from kvplan.analysis.plan.records import Candidate, Lever
from kvplan.analysis.plan.search import after_capacity, verify_many
from kvplan.analysis.plan.why.explain import breaking_term, lever_variants
from kvplan.analysis.plan.why.margin import lever_with_band
from kvplan.costs.pricing import fleet_cost
from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.prices import PriceTable

BASELINE = "none (the winner)"


def binding_key(w: Candidate) -> str | None:
    """The winner's binding SLO term: the one that breaks first with one replica fewer
    (``breaking_term``), else its capacity search's, else its fleet's smallest margin; None
    for goodput (no percentile to compare)."""
    key = breaking_term(w.fleet, w.fleet_one_fewer)
    if key is None and w.capacity is not None and w.capacity.binding_slo:
        key = w.capacity.binding_slo
    if key is None and w.fleet is not None and w.fleet.margins:
        key = min(w.fleet.margins, key=lambda kv: kv[1])[0]
    return None if key == "goodput_share" else key


def levers(w: Candidate, gpus: tuple[HardwareSpec, ...], prices: PriceTable, ex: Executor,
           ctx: JobContext, lim: Limits, t: Tally) -> tuple[Lever, ...]:
    """The winner's row, then one row per single change (see the module docstring)."""
    key = binding_key(w)
    built, notes = _buildable(w, gpus, prices, key)
    if lim.rate_rps is None:
        rows = _capacity_rows(w, built, ex, ctx, lim, t, key, prices)
    else:
        rows = _target_rows(w, built, ex, ctx, lim, t, key, prices)
    first = _row(BASELINE, w, w, key, lim.rate_rps)
    return (lever_with_band(first, w.deployment, key, ctx.slo), *rows,
            *(_note(label, why, key) for label, why in notes))


def _buildable(w: Candidate, gpus: tuple[HardwareSpec, ...], prices: PriceTable,
               key: str | None) -> tuple[list[tuple[str, Deployment]], list[tuple[str, str]]]:
    """The variants that fit and can be rented, and why the others cannot."""
    ok, notes = [], []
    for label, d in lever_variants(w, gpus, prices, key):
        nodes = [r.gpus_per_node for r in prices.for_gpu(d.gpu.id)]
        if nodes and d.gpus_per_replica > max(nodes):
            why = ("the planner prices one vllm serve within one node"
                   if d.engine.data_parallel_size > 1 else
                   "a tensor-parallel group must sit in one node")
            notes.append((label, f"a replica needs {d.gpus_per_replica} GPUs, more than one "
                                 f"{max(nodes)}-GPU {d.gpu.id} node holds ({why})"))
            continue
        try:
            replica(d)  # its memory plan, and its step timer (a DP / EP step needs tables)
        except KvplanError as exc:
            notes.append((label, str(exc).split(";")[0]))
            continue
        ok.append((label, d))
    return ok, notes


def _screened(i: int, d: Deployment, ctx: JobContext, lim: Limits, prices: PriceTable
              ) -> Candidate:
    """A variant as a funnel candidate: its bounds and optimistic fleet, not pruned."""
    b = bounds(replica(d, ctx.profile), ctx.bounds_work, ctx.slo_for(d))
    n = optimistic_replicas(b, lim)
    cost = fleet_cost(prices.for_gpu(d.gpu.id), n, d.gpus_per_replica)
    return Candidate(id=f"lever{i}", deployment=d, stage="screened", reason="",
                     ceilings_rps=b.ceilings_rps, zero_load_margins=b.zero_load.margins,
                     optimistic_replicas=n,
                     optimistic_usd_per_hour=None if cost is None else cost.usd_per_hour)


def _target_rows(w: Candidate, built: list[tuple[str, Deployment]], ex: Executor,
                 ctx: JobContext, lim: Limits, t: Tally, key: str | None,
                 prices: PriceTable) -> list[Lever]:
    cands = [_screened(i, d, ctx, lim, prices) for i, (_, d) in enumerate(built)]
    outs = run_capacity(ex, ctx, cands, lim, t)
    done = [after_capacity(c, o, prices, lim) for c, o in zip(cands, outs, strict=True)]
    sim = [i for i, c in enumerate(done) if c.stage == "simulated"]
    checked = verify_many([done[i] for i in sim], ex, ctx, prices, lim, t)  # side by side
    for i, one in zip(sim, checked, strict=True):
        done[i] = one
    at_w = _at_winner_size(w, done, ex, ctx, t, key)
    rows = []
    for (label, d), c, v in zip(built, done, at_w, strict=True):
        x = replace(_row(label, c, w, key, lim.rate_rps), binding_p99_ms=v,
                    delta_binding_p99_ms=_minus(v, _value(w, key)))
        rows.append(lever_with_band(x, d, key, ctx.slo))
    return rows


def _at_winner_size(w: Candidate, done: list[Candidate], ex: Executor, ctx: JobContext,
                    t: Tally, key: str | None) -> list[float | None]:
    """Each variant's binding term with the winner's replica count, whole trace."""
    n = w.replicas or 1
    have = [c.fleet if c.fleet is not None and c.fleet.replicas == n else (
        c.fleet_one_fewer if c.fleet_one_fewer is not None
        and c.fleet_one_fewer.replicas == n else None) for c in done]
    if key is None:
        return [None] * len(done)
    need = [i for i, f in enumerate(have) if f is None]  # one batch: simulated side by side
    outs = run_fleet_jobs(ex, ctx, [FleetJob(deployment=done[i].deployment, replicas=n)
                                    for i in need])
    tally(t, outs)
    for i, o in zip(need, outs, strict=True):
        have[i] = o.info
    return [None if f is None else dict(f.achieved).get(key) for f in have]


def _capacity_rows(w: Candidate, built: list[tuple[str, Deployment]], ex: Executor,
                   ctx: JobContext, lim: Limits, t: Tally, key: str | None,
                   prices: PriceTable) -> list[Lever]:
    assert w.capacity is not None
    jobs = []
    for i, (_, d) in enumerate(built):
        c = _screened(i, d, ctx, lim, prices)
        opt = min(v for _, v in c.ceilings_rps)
        jobs.append(CapacityJob(deployment=d, guess_rps=min(w.capacity.rate_rps, opt),
                                ceiling_rps=opt, probe_rps=w.capacity.rate_rps))
    outs = [o for o in ex.run(ctx, jobs) if isinstance(o, CapacityOut)]
    tally(t, outs)
    rows = []
    for (label, d), o in zip(built, outs, strict=True):
        c = after_capacity(Candidate(id="lever", deployment=d, stage="screened", reason=""),
                           o, prices, lim)
        v = dict(o.at_probe).get(key) if key else None
        x = replace(_row(label, c, w, key, lim.rate_rps), binding_p99_ms=v,
                    delta_binding_p99_ms=_minus(v, _value(w, key)))
        rows.append(lever_with_band(x, d, key, ctx.slo))
    return rows


def _value(c: Candidate, key: str | None) -> float | None:
    """The binding term of a candidate's answer: its verified fleet, else at capacity."""
    if key is None:
        return None
    if c.fleet is not None:
        return dict(c.fleet.achieved).get(key)
    return dict(c.capacity.achieved_at_capacity).get(key) if c.capacity else None


def load_per_replica(c: Candidate, rate_rps: float | None) -> float | None:
    """Requests/s each replica serves: the fleet's rate / replicas, or the capacity."""
    if c.stage != "verified":
        return None
    if rate_rps is not None and c.replicas:
        return rate_rps / c.replicas
    return c.capacity.rate_rps if c.capacity else None


def _row(label: str, c: Candidate, w: Candidate, key: str | None, rate: float | None
         ) -> Lever:
    """One row: the variant's verified figures and their deltas against the winner's."""
    cap, cap0 = load_per_replica(c, rate), load_per_replica(w, rate)
    ok = c.stage == "verified"
    n, usd = (c.replicas, c.usd_per_hour) if ok else (None, None)
    v = _value(c, key)
    return Lever(change=label, binding_key=key, capacity_rps=cap,
                 delta_capacity_pct=None if cap is None or not cap0 else 100 * (cap / cap0 - 1),
                 replicas=n,
                 delta_replicas=None if n is None or w.replicas is None else n - w.replicas,
                 usd_per_hour=usd, delta_usd_per_hour=_minus(usd, w.usd_per_hour),
                 binding_p99_ms=v, delta_binding_p99_ms=_minus(v, _value(w, key)),
                 note="" if ok else c.reason, verified=ok)


def _minus(a: float | int | None, b: float | int | None) -> float | int | None:
    return None if a is None or b is None else a - b


def _note(label: str, why: str, key: str | None) -> Lever:
    return Lever(change=label, binding_key=key, capacity_rps=None, delta_capacity_pct=None,
                 replicas=None, delta_replicas=None, usd_per_hour=None,
                 delta_usd_per_hour=None, binding_p99_ms=None, delta_binding_p99_ms=None,
                 note=why)
