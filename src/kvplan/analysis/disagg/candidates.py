"""The records of the joint aggregated/disaggregated search: candidates, the plan, what-ifs,
and the answer the CLI renders."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.analysis.disagg.serving import DisaggRun
from kvplan.analysis.plan.judge import Verdict
from kvplan.analysis.plan.records import Candidate
from kvplan.costs.pricing import FleetCost
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.slo import Slo

KINDS = ("aggregated", "disaggregated")
RankKey = tuple[float, int, int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class JointCandidate:
    """One candidate of either kind: where the search left it and what it costs."""

    id: str
    kind: str
    stage: str
    reason: str
    gpus: int
    usd_per_hour: float | None
    index: int
    aggregated: Candidate | None = None
    disagg: DisaggDeployment | None = None
    pool_costs: tuple[FleetCost, ...] = ()
    """Disaggregated: the prefill pool's and the decode pool's rented instances."""
    verdict: Verdict | None = None
    run: DisaggRun | None = None

    @property
    def key(self) -> RankKey:
        usd = math.inf if self.usd_per_hour is None else self.usd_per_hour
        return (usd, KINDS.index(self.kind), self.gpus, self.index)

    @property
    def verified(self) -> bool:
        if self.kind == "aggregated":
            return self.stage == "verified"
        return self.verdict is not None and self.verdict.ok


@dataclass(frozen=True, slots=True, kw_only=True)
class JointPlan:
    """Every candidate of both kinds and the cheapest verified one (None: nothing met it)."""

    candidates: tuple[JointCandidate, ...]
    winner: JointCandidate | None
    search: str
    simulations: int
    aggregated_best: JointCandidate | None = None
    """The aggregated planner's winner (None: no aggregated configuration met the SLO)."""

    @property
    def best_disagg(self) -> JointCandidate | None:
        ok = [c for c in self.candidates if c.kind == "disaggregated" and c.verified]
        return min(ok, key=lambda c: c.key) if ok else None


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggLever:
    """One what-if on a disaggregated fleet, simulated on the same traffic."""

    change: str
    label: str
    usd_per_hour: float | None
    delta_usd_per_hour: float | None
    binding_key: str
    binding_ms: float
    delta_binding_ms: float
    meets_slo: bool
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class JointSide:
    """The joint search's answer and the what-ifs on its best disaggregated fleet."""

    joint: JointPlan
    levers: tuple[DisaggLever, ...]
    slo: Slo
    model_id: str
    bench: str
    """The aggregated plan's `vllm bench serve` line aimed at the proxy."""

    @property
    def best(self) -> JointCandidate | None:
        return self.joint.winner
