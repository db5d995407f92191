"""The planner's units of work (capacity searches, fleet simulations), run by an executor.

Each job is a pure function of its inputs, so the plan is the same whatever runs the jobs:
in this process, in worker processes (``local``), or as Ray tasks over batches (``ray``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.analysis.capacity_search import Capacity, Probe, find_capacity, probe
from kvplan.analysis.fleet import FleetRun, Replica, simulate_fleet
from kvplan.analysis.plan_types import CapacityInfo, FleetInfo
from kvplan.specs.deployment import Deployment
from kvplan.specs.slo import Slo
from kvplan.specs.workload import Workload


@dataclass(frozen=True, slots=True, kw_only=True)
class JobContext:
    """What every job shares: the unit-rate sample, the fleet workload, the SLO, the profile."""

    unit: Workload
    target: Workload | None
    slo: Slo
    profile: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityJob:
    deployment: Deployment
    guess_rps: float
    ceiling_rps: float
    probe_rps: float | None = None
    """Also simulate this rate (the lever what-ifs: the winner's per-replica load)."""
    target_rps: float | None = None
    """The fleet rate: stop narrowing once the replica count is decided."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetJob:
    deployment: Deployment
    replicas: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeJob:
    """Simulate one replica on the unit stream at one rate (the what-ifs' common load)."""

    deployment: Deployment
    rate_rps: float


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


Job = CapacityJob | FleetJob | ProbeJob
Out = CapacityOut | FleetOut | ProbeOut


def run_jobs(ctx: JobContext, jobs: Sequence[Job]) -> list[Out]:
    """Run a batch of jobs in order (one Ray task or one worker call)."""
    return [run_job(ctx, job) for job in jobs]


def run_job(ctx: JobContext, job: Job) -> Out:
    rep = Replica(job.deployment, ctx.profile)
    if isinstance(job, FleetJob):
        assert ctx.target is not None
        run = simulate_fleet(rep, ctx.target, job.replicas, ctx.slo)
        return FleetOut(info=fleet_info(run), sim_requests=run.requests)
    if isinstance(job, ProbeJob):
        v = probe(rep, ctx.unit, ctx.slo, job.rate_rps).verdict
        return ProbeOut(achieved=v.achieved, sim_requests=len(ctx.unit))
    cap = find_capacity(rep, ctx.unit, ctx.slo, guess=job.guess_rps, ceiling=job.ceiling_rps,
                        target_rps=job.target_rps)
    extra: tuple[tuple[str, float], ...] = ()
    sims = cap.sim_requests
    if job.probe_rps is not None:
        extra = probe(rep, ctx.unit, ctx.slo, job.probe_rps).verdict.achieved
        sims += len(ctx.unit)
    return CapacityOut(info=capacity_info(cap), sim_requests=sims, at_probe=extra)


def capacity_info(cap: Capacity) -> CapacityInfo:
    lo, hi = cap.lo, cap.hi
    evidence: Probe | None = lo or hi
    return CapacityInfo(
        rate_rps=cap.rate_rps,
        bracket_rps=(cap.rate_rps, None if hi is None else hi.rate_rps),
        probes=cap.probes,
        binding_slo=None if hi is None else hi.verdict.binding,
        margins_at_hi=() if hi is None else hi.verdict.margins,
        achieved_at_hi=() if hi is None else hi.verdict.achieved,
        peak_kv_usage=0.0 if evidence is None else evidence.peak_kv_usage,
        preemptions=0 if evidence is None else evidence.preemptions,
        seqs_capped_share=0.0 if evidence is None else evidence.seqs_capped_share,
        budget_full_share=0.0 if evidence is None else evidence.budget_full_share,
        prefill_token_share=0.0 if evidence is None else evidence.prefill_token_share,
        prefill_kv_share=0.0 if evidence is None else evidence.prefill_kv_share)


def fleet_info(run: FleetRun) -> FleetInfo:
    v = run.verdict
    rate = run.output_tokens / run.duration_s if run.duration_s > 0 else 0.0
    return FleetInfo(replicas=run.replicas, ok=v.ok, achieved=v.achieved, margins=v.margins,
                     output_tokens_per_s=rate, peak_kv_usage=run.peak_kv_usage,
                     preemptions=run.preemptions,
                     requests_per_replica=run.requests_per_replica)
