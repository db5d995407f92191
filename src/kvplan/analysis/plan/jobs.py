"""The planner's units of work (capacity searches, fleet simulations), run by an executor.

Each job is a pure function of its inputs, so the plan is the same whatever runs the jobs:
in this process, in worker processes (``local``), or as Ray tasks over batches (``ray``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvplan.analysis.plan.bands import edge_slo, goodput_band, ratios_for
from kvplan.analysis.plan.capacity_search import Capacity, Probe, find_capacity, probe
from kvplan.analysis.plan.fleet import (
    FleetRun,
    ReplicaPart,
    fleet_assignment,
    replica,
    replica_part,
    simulate_fleet,
)
from kvplan.analysis.plan.judge import Latencies, judge, ttft_share_of_e2el
from kvplan.analysis.plan.records import CapacityInfo, FleetInfo
from kvplan.analysis.plan.shares import ReplicaSearch, find_replicas, share_probe
from kvplan.specs.deployment import Deployment
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo, WarmupRule


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """What every job shares: the unit-rate sample, the fleet workload, the SLO, the profile."""

    unit: Workload
    target: Workload | None
    slo: Slo
    rate_rps: float | None = None
    """The fleet's target rate (target mode), None in capacity mode."""
    profile: str | None = None
    slo_margin: str = "none"
    """'band': every job judges the SLO at the band's pessimistic edge (plan_bands)."""

    @property
    def bounds_work(self) -> Workload:
        """The requests the analytic bounds read: the fleet's trace, else the unit sample."""
        return self.target if self.target is not None else self.unit

    def slo_for(self, d: Deployment) -> Slo:
        """The SLO a replica of ``d`` must meet: the user's, or its band-edge version."""
        if self.slo_margin == "none":
            return self.slo
        return edge_slo(self.slo, ratios_for(d))


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityJob:
    deployment: Deployment
    guess_rps: float
    ceiling_rps: float
    probe_rps: float | None = None
    """Also simulate this rate (the lever what-ifs: the winner's per-replica load)."""
    target_rps: float | None = None
    """The fleet rate: stop narrowing once the replica count is decided."""
    floor_replicas: int = 1
    """Target mode: the optimistic fleet, where the replica search starts (a lower bound)."""
    cap_replicas: int = 1
    """Target mode: the largest fleet the replica search tries."""
    fixed_replicas: int | None = None
    """Target mode with --replicas N: judge only that fleet's shares."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetJob:
    deployment: Deployment
    replicas: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PartJob:
    """Replica ``index`` of a FleetJob's fleet alone (executor.run_fleet_jobs spreads a fleet's
    replicas over idle workers)."""

    deployment: Deployment
    replicas: int
    index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PartOut:
    part: ReplicaPart | None
    sim_requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeJob:
    """Simulate one replica on the unit stream at one rate (the what-ifs' common load)."""

    deployment: Deployment
    rate_rps: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareJob:
    """Simulate N replicas' router shares once (target mode's what-ifs at a common fleet)."""

    deployment: Deployment
    replicas: int
    whole: bool = False
    """Every share of the whole trace (as a fixed --replicas or a verified fleet was judged),
    not the busiest stretch of the sample."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeOut:
    achieved: tuple[tuple[str, float], ...]
    sim_requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityOut:
    info: CapacityInfo
    sim_requests: int
    at_probe: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetOut:
    info: FleetInfo
    sim_requests: int


Job = CapacityJob | FleetJob | PartJob | ProbeJob | ShareJob
Out = CapacityOut | FleetOut | PartOut | ProbeOut


def run_jobs(ctx: JobContext, jobs: Sequence[Job]) -> list[Out]:
    """Run a batch of jobs in order (one Ray task or one worker call)."""
    return [run_job(ctx, job) for job in jobs]


def run_job(ctx: JobContext, job: Job) -> Out:
    rep = replica(job.deployment, ctx.profile)
    slo = ctx.slo_for(job.deployment)
    if isinstance(job, FleetJob):
        assert ctx.target is not None
        run = simulate_fleet(rep, ctx.target, job.replicas, slo)
        return FleetOut(info=fleet_info(run, ctx, job.deployment), sim_requests=run.requests)
    if isinstance(job, PartJob):
        assert ctx.target is not None
        assign = fleet_assignment(rep, ctx.target, job.replicas)
        assert assign is not None
        part = replica_part(rep, ctx.target, assign, job.index, slo.judges_itl)
        return PartOut(part=part, sim_requests=0 if part is None else len(part.ids))
    if isinstance(job, ShareJob):
        assert ctx.target is not None and ctx.rate_rps is not None
        sp = share_probe(rep, ctx.target, slo, job.replicas,
                         len(ctx.target) if job.whole else len(ctx.unit), ctx.rate_rps)
        return ProbeOut(achieved=sp.probe.verdict.achieved, sim_requests=sp.requests)
    if isinstance(job, ProbeJob):
        v = probe(rep, ctx.unit, slo, job.rate_rps).verdict
        return ProbeOut(achieved=v.achieved, sim_requests=len(ctx.unit))
    if ctx.target is not None and ctx.rate_rps is not None:
        found = find_replicas(rep, ctx.target, slo, floor=job.floor_replicas,
                              cap=job.cap_replicas, sample=len(ctx.unit), rate_rps=ctx.rate_rps,
                              fixed=job.fixed_replicas)
        return CapacityOut(info=replicas_info(found, ctx, job.deployment),
                           sim_requests=found.sim_requests)
    cap = find_capacity(rep, ctx.unit, slo, guess=job.guess_rps, ceiling=job.ceiling_rps,
                        target_rps=job.target_rps)
    extra: tuple[tuple[str, float], ...] = ()
    sims = cap.sim_requests
    if job.probe_rps is not None:
        extra = probe(rep, ctx.unit, slo, job.probe_rps).verdict.achieved
        sims += len(ctx.unit)
    return CapacityOut(info=capacity_info(cap, ctx, job.deployment), sim_requests=sims,
                       at_probe=extra)


def replicas_info(s: ReplicaSearch, ctx: JobContext, d: Deployment) -> CapacityInfo:
    """The replica search as a CapacityInfo: capacity = the per-replica load at the fewest
    passing replicas; ``bracket_rps`` = [that load, the load at the largest failing fleet]."""
    lo, hi = (None if s.lo is None else s.lo.probe), (None if s.hi is None else s.hi.probe)
    # the counters that explain the fleet size are those of the fleet one step too small
    info = capacity_info(Capacity(lo=lo, hi=hi, probes=s.probes, sim_requests=s.sim_requests),
                         ctx, d, evidence=hi or lo)
    top = s.lo or s.hi
    return replace(info, method="router-share",
                   replicas=None if s.lo is None else s.lo.replicas,
                   replicas_failing=None if s.hi is None else s.hi.replicas,
                   shares_simulated=0 if top is None else top.shares,
                   share_requests=0 if top is None else top.requests)


def capacity_info(cap: Capacity, ctx: JobContext, d: Deployment,
                  evidence: Probe | None = None) -> CapacityInfo:
    """The search's result, and the raw prediction at the capacity rate under the user's
    SLO with its goodput band (the answer in capacity mode). The counters come from
    ``evidence`` (default: the highest passing probe, else the failing one)."""
    lo, hi = cap.lo, cap.hi
    evidence = evidence or lo or hi
    raw = None
    band = None
    if lo is not None:  # the probe was judged under ctx.slo itself unless under a margin
        raw = lo.verdict if ctx.slo_margin == "none" else judge(lo.latencies, ctx.slo)
        band = goodput_band(lo.latencies, ctx.slo, ratios_for(d))
    return CapacityInfo(
        achieved_at_capacity=() if raw is None else raw.achieved, goodput_share_band=band,
        unsampled_at_capacity=() if raw is None else raw.unsampled,
        rate_rps=cap.rate_rps,
        bracket_rps=(cap.rate_rps, None if hi is None else hi.rate_rps),
        probes=cap.probes,
        binding_slo=None if evidence is None else (hi or evidence).verdict.binding,
        goodput_misses=() if evidence is None else (hi or evidence).verdict.goodput_misses,
        e2el_ttft_share=0.0 if evidence is None else ttft_share_of_e2el(
            (hi or evidence).latencies, ctx.slo),
        margins_at_hi=() if hi is None else hi.verdict.margins,
        achieved_at_hi=() if hi is None else hi.verdict.achieved,
        peak_kv_usage=0.0 if evidence is None else evidence.peak_kv_usage,
        preemptions=0 if evidence is None else evidence.preemptions,
        seqs_capped_share=0.0 if evidence is None else evidence.seqs_capped_share,
        budget_full_share=0.0 if evidence is None else evidence.budget_full_share,
        prefill_token_share=0.0 if evidence is None else evidence.prefill_token_share,
        prefill_kv_share=0.0 if evidence is None else evidence.prefill_kv_share)


def fleet_info(run: FleetRun, ctx: JobContext, d: Deployment) -> FleetInfo:
    """The fleet's verdict (margins under the SLO it was judged by); ``achieved`` is always
    the raw prediction under the user's SLO, with its goodput band."""
    v = run.verdict
    raw = v if ctx.slo_margin == "none" else judge(run.latencies, ctx.slo)
    band = goodput_band(run.latencies, ctx.slo, ratios_for(d))
    rate = run.output_tokens / run.duration_s if run.duration_s > 0 else 0.0
    steady = (ctx.rate_rps * run.output_tokens / run.requests
              if ctx.rate_rps is not None and run.requests else 0.0)
    return FleetInfo(replicas=run.replicas, ok=v.ok, achieved=raw.achieved, margins=v.margins,
                     goodput_share_band=band, unsampled=raw.unsampled,
                     output_tokens_per_s=rate, steady_output_tokens_per_s=steady,
                     peak_kv_usage=run.peak_kv_usage,
                     preemptions=run.preemptions,
                     requests_per_replica=run.requests_per_replica,
                     judged_requests=raw.judged_requests,
                     intervals=tuple((k, (i.low, i.high)) for k, i in raw.intervals),
                     within_noise=raw.within_noise, goodput_misses=v.goodput_misses,
                     achieved_all_requests=achieved_all(run.latencies, ctx.slo))


def achieved_all(lat: Latencies, slo: Slo) -> tuple[tuple[str, float], ...]:
    """The SLO terms over every request (no warm-up dropped), as vllm bench serve reports
    the run."""
    every = replace(slo, warmup=WarmupRule(fraction=0.0))
    return judge(replace(lat, concurrency=None), every, intervals=False).achieved
