"""Typed results of a plan: one record per candidate (with the stage that dropped it), the Plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.analysis.plan.bands import PRICED_TARGET, PlanBands, priced_burst
from kvplan.costs.pricing import FleetCost
from kvplan.specs.deployment import Deployment
from kvplan.specs.prices import PriceTable
from kvplan.specs.slo import Slo

STAGES = ("invalid", "duplicate", "pruned_memory", "pruned_bound", "pruned_cost", "infeasible",
          "simulated", "verified")
"""Where a candidate's search ended (docs/planner.md, The funnel)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityInfo:
    """Capacity search result for one replica (requests/s) and its probes' SLO margins."""

    rate_rps: float
    bracket_rps: tuple[float, float | None]
    probes: int
    binding_slo: str | None
    goodput_misses: tuple[tuple[str, float], ...] = ()
    """Where goodput binds: per goodput metric, the share of judged requests over its bound
    (the verdict's that named ``binding_slo``)."""
    e2el_ttft_share: float = 0.0
    """The TTFT share of the judged requests' E2EL there (an E2EL binding's prefill part)."""
    margins_at_hi: tuple[tuple[str, float], ...] = ()
    achieved_at_hi: tuple[tuple[str, float], ...] = ()
    peak_kv_usage: float = 0.0
    preemptions: int = 0
    seqs_capped_share: float = 0.0
    budget_full_share: float = 0.0
    prefill_token_share: float = 0.0
    prefill_kv_share: float = 0.0
    achieved_at_capacity: tuple[tuple[str, float], ...] = ()
    """The SLO terms at the capacity rate, under the user's SLO (the raw prediction)."""
    goodput_share_band: tuple[float, float] | None = None
    """Goodput share at the capacity rate at the band's (pessimistic, optimistic) edges."""
    unsampled_at_capacity: tuple[str, ...] = ()
    """The SLO terms no judged request has a value of there (Verdict.unsampled)."""
    method: str = "rate"
    """'rate' (capacity mode: one replica's stream at scaled rates) or 'router-share'
    (target mode: N replicas' shares of the trace as the router sends them, plan_shares)."""
    replicas: int | None = None
    """router-share: the fewest replicas whose shares passed (None: none up to the cap)."""
    replicas_failing: int | None = None
    """router-share: the largest fleet tried below it that failed."""
    shares_simulated: int = 0
    """router-share: shares simulated at the capacity point (of ``replicas``)."""
    share_requests: int = 0
    """router-share: requests in those shares."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetInfo:
    """A verified fleet at the target rate: achieved SLO terms and counters."""

    replicas: int
    ok: bool
    achieved: tuple[tuple[str, float], ...]
    margins: tuple[tuple[str, float], ...]
    output_tokens_per_s: float
    """Output tokens / run duration (vllm bench serve's Output token throughput)."""
    peak_kv_usage: float
    preemptions: int
    requests_per_replica: tuple[int, ...]
    steady_output_tokens_per_s: float = 0.0
    """The target rate x output tokens per request: what the fleet turns out serving the
    target load for good, with no run start or drain ($/M out tok is priced at it)."""
    held_rps: float | None = None
    """Where the target rate is above what the fleet can hold for good, the most it can
    (replicas x one replica's smallest steady-state ceiling, req/s); else None."""
    goodput_share_band: tuple[float, float] | None = None
    """Goodput share at the band's (pessimistic, optimistic) edges (plan_bands)."""
    unsampled: tuple[str, ...] = ()
    """The SLO terms no judged request has a value of (Verdict.unsampled)."""
    judged_requests: int = 0
    """Requests in the steady-state window the verdict was judged on."""
    intervals: tuple[tuple[str, tuple[float | None, float | None]], ...] = ()
    """Each SLO term's 95 % sampling interval (plan_noise; None: too few requests)."""
    within_noise: tuple[str, ...] = ()
    """The terms whose limit lies inside their interval (the verdict could flip)."""
    goodput_misses: tuple[tuple[str, float], ...] = ()
    """Per goodput metric, the share of judged requests over its bound."""
    achieved_all_requests: tuple[tuple[str, float], ...] = ()
    """The SLO terms over every request, warm-up included: what ``vllm bench serve`` prints
    for the same run (``achieved`` is judged without the warm-up, WarmupRule)."""

    def priced(self) -> tuple[float, str]:
        """The output rate (tok/s) $/M out tok is priced at, and what it is: the target load
        held for good, or, where the fleet cannot hold it, the run's own rate."""
        if self.held_rps is None:
            return self.steady_output_tokens_per_s, PRICED_TARGET
        return self.output_tokens_per_s, priced_burst(self.held_rps)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lever:
    """One knob changed on the winner, and what it does to capacity, replicas and cost."""

    change: str
    capacity_rps: float | None
    """Requests/s each replica serves in the variant's verified fleet (capacity mode: its
    capacity)."""
    delta_capacity_pct: float | None
    replicas: int | None
    delta_replicas: int | None
    usd_per_hour: float | None
    delta_usd_per_hour: float | None
    binding_p99_ms: float | None
    delta_binding_p99_ms: float | None
    note: str = ""
    binding_p99_ms_band: tuple[float, float] | None = None
    """The band (10-90 %) of ``binding_p99_ms`` for this variant's GPU and TP."""
    binding_key: str | None = None
    """The SLO term ``binding_p99_ms`` holds (e.g. ``p50_ttft_ms``; the name is historic)."""
    verified: bool = False
    """True when the row's replicas and $/hour come from a verified fleet."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Binding:
    """The resource that limits the candidate, with the counters that say so."""

    primary: str
    evidence: tuple[tuple[str, float], ...]
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One point of the search space and how far the funnel took it."""

    id: str
    deployment: Deployment
    stage: str
    reason: str
    kv_cache_tokens: int | None = None
    ceilings_rps: tuple[tuple[str, float], ...] = ()
    zero_load_margins: tuple[tuple[str, float], ...] = ()
    optimistic_replicas: int | None = None
    optimistic_usd_per_hour: float | None = None
    capacity: CapacityInfo | None = None
    replicas: int | None = None
    cost: FleetCost | None = None
    fleet: FleetInfo | None = None
    fleet_one_fewer: FleetInfo | None = None
    usd_per_million_output_tokens: float | None = None
    binding: Binding | None = None
    bands: PlanBands | None = None
    """The predicted SLO terms and output rate with their error bands (verified ones)."""

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.cost is None else self.cost.usd_per_hour


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchReport:
    """Counts per funnel stage, simulated requests, executor and wall time."""

    search: str
    executor: str
    workers: int
    enumerated: int
    stage_counts: tuple[tuple[str, int], ...]
    capacity_searches: int
    fleet_simulations: int
    probes: int
    sim_requests: int
    wall_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The answer: the winner (None when nothing is feasible), every candidate, why."""

    model: str
    mode: str
    """'target' (a fleet rate to serve) or 'capacity' (no rate: max rate of one replica)."""
    target_rate_rps: float | None
    slo: Slo
    prices: PriceTable
    workload: str
    requests: int
    sample_requests: int
    seed: int
    candidates: tuple[Candidate, ...]
    winner: Candidate | None
    levers: tuple[Lever, ...]
    report: SearchReport
    warnings: tuple[str, ...] = ()
    infeasible_why: str = ""
    serve_command: str = ""
    bench_command: str = ""
    slo_margin: str = "none"
    """'band': the SLO was required at the band's pessimistic edge (--slo-margin band)."""
    without_margin: Candidate | None = None
    """With --slo-margin band: the winner of the same search without the margin."""
    trace_requests: int = 0
    """Requests in the whole trace (``requests`` is what the plan served and verified)."""
    advice: str = ""
    """Nothing feasible: the what-if on the closest candidate that moves its missed term most."""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return "feasible" if self.winner is not None else "infeasible"
