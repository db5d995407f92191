"""Error bands on a plan's answers, what they mean for the SLO, and ``--slo-margin band``.

A candidate's replica (model family, GPU, tensor-parallel degree) picks the nearest
calibration group (``kvplan.costs.step.uncertainty.deployment_bands``); a predicted value v has
the band [v x low_ratio, v x high_ratio] of that group's held-out measured / predicted
spread (10th and 90th percentile). For a percentile bound the pessimistic edge is the upper
one (v x high); for the goodput share it is the share of requests that stay good when every
latency is scaled by its metric's high ratio.

``--slo-margin band`` asks the SLO to hold at the pessimistic edge: a bound ``limit`` on a
metric becomes ``limit / max(1, high)`` (the same for each goodput bound), so the funnel's
zero-load pruning, the capacity searches and the fleet verification all judge the same,
tighter SLO (``edge_slo``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kvplan.specs.deployment import Deployment
from kvplan.specs.slo import Slo

MARGINS = ("none", "band")
"""--slo-margin: judge the prediction itself, or the band's pessimistic edge."""
METRIC_KEY = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "e2e_s",
              "output_tokens_per_s": "output_throughput_tok_s"}
"""SLO metric (and the fleet's output rate) -> the calibration metric bounding it."""

Pair = tuple[float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ratios:
    """The band ratios (low, high) per SLO metric of one replica, and where they came from."""

    ratios: tuple[tuple[str, Pair | None], ...]
    basis: str
    notes: tuple[str, ...]
    bases: tuple[tuple[str, str], ...] = ()
    """Per metric, the group its ratios come from (groups differ: TTFT may fall back to the
    family while TPOT has its own GPU and TP group)."""

    def get(self, metric: str) -> Pair | None:
        return dict(self.ratios).get(metric)

    def basis_of(self, metric: str) -> str:
        return dict(self.bases).get(metric, "no calibration residuals")

    def up(self, metric: str) -> float:
        """The factor --slo-margin band divides a bound by (never below 1)."""
        pair = self.get(metric)
        return 1.0 if pair is None else max(1.0, pair[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class SloCheck:
    """One SLO term of a predicted answer, its band, and whether it holds at the band's
    pessimistic edge (``edge``: upper for a latency, lower for the goodput share)."""

    key: str
    basis: str
    """The calibration group the band comes from."""
    limit: float
    """ms for a percentile bound; the target share for ``goodput_share``."""
    value: float
    band: Pair | None
    met: bool
    edge: float | None
    met_at_edge: bool | None
    """None where no calibration residuals bound the metric."""
    sampled: bool = True
    """False where no judged request has a value of the term (TPOT of 1-token outputs):
    ``value`` is then vLLM's placeholder 0 and there is no band."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanBands:
    """A candidate's predicted SLO terms and output rate with their bands."""

    checks: tuple[SloCheck, ...]
    output_tokens_per_s: float | None
    output_tokens_per_s_band: Pair | None
    basis: str
    notes: tuple[str, ...]
    output_basis: str = ""
    """The calibration group of the output rate's band."""
    output_definition: str = "run"
    """What ``output_tokens_per_s`` is (OUTPUT_DEFINITIONS): 'run', a simulated run's output
    tokens / its duration (vllm bench serve's), or 'sustained', one replica's capacity x the
    mean output length (capacity mode: the rate a replica keeps up, with no drain)."""
    priced_output_tokens_per_s: float | None = None
    """The output rate $/M out tok is priced at where it is not ``output_tokens_per_s``
    (None: that figure), with the fleet's $/hour; ``priced_definition`` says what it is."""
    priced_definition: str = ""

    @property
    def robust(self) -> bool | None:
        """Every term still met at the band's pessimistic edge (None when none is banded)."""
        edges = [c.met_at_edge for c in self.checks if c.met_at_edge is not None]
        return all(edges) if edges else None


OUTPUT_DEFINITIONS = {
    "run": "output tokens / run duration, as vllm bench serve's Output token throughput",
    "sustained": "capacity (req/s) x mean output tokens, with no run start or drain; vllm "
                 "bench serve's Output token throughput over a finite run reads lower"}
"""``PlanBands.output_definition`` -> what the figure is, in words (text and JSON)."""
PRICED_TARGET = ("the target load held for good: target rate x output tokens per request, "
                 "with no run start or drain after the last arrival")
"""What target mode's ``PlanBands.priced_output_tokens_per_s`` is (text and JSON)."""


def priced_burst(held_rps: float) -> str:
    """What target mode's priced rate is where the fleet cannot hold the target load: the
    run's own output tokens / duration (``FleetInfo.held_rps``)."""
    return (f"the run's own output tokens / duration: the target rate is above the "
            f"{held_rps:.3g} req/s "
            "this fleet can hold for good (its replicas x one replica's smallest steady-state "
            "ceiling), so the trace is a burst the fleet drains, not a load it holds")


def priced_unit(replicas: int) -> str:
    """What capacity mode's priced rate is when one rented unit holds several replicas."""
    return f"the {replicas} replicas one rented unit holds, each at its sustained rate"


def ratios_for(d: Deployment) -> Ratios:
    """Band ratios of one replica of ``d`` (its GPU and tensor-parallel degree)."""
    from kvplan.costs.step.uncertainty import band_basis, deployment_bands, family_of

    gpu, tp = d.gpu.id, d.engine.tensor_parallel_size
    ones: dict[str, float | None] = dict.fromkeys(METRIC_KEY, 1.0)
    out = deployment_bands(d.model, gpu, tp, ones, key_of=METRIC_KEY)
    pairs = tuple((m, _pair(out[f"{m}_band"])) for m in METRIC_KEY)
    bases = tuple((m, band_basis(family=family_of(d.model), gpu=gpu, tp=tp, metric=k))
                  for m, k in METRIC_KEY.items())
    return Ratios(ratios=pairs, basis=str(out["band_basis"]),
                  notes=tuple(out["calibration_notes"]), bases=bases)


def _pair(band: Any) -> Pair | None:
    return None if band is None else (float(band[0]), float(band[1]))


def edge_slo(slo: Slo, r: Ratios) -> Slo:
    """The SLO the band's pessimistic edge must meet: each bound divided by max(1, high)."""
    bounds = tuple(replace(b, limit_ms=b.limit_ms / r.up(b.metric)) for b in slo.bounds)
    good = tuple((m, ms / r.up(m)) for m, ms in slo.goodput_ms)
    return replace(slo, bounds=bounds, goodput_ms=good)


def scaled_goodput(slo: Slo, r: Ratios, edge: int) -> tuple[tuple[str, float], ...]:
    """Goodput bounds for latencies scaled by each metric's ratio ``edge`` (0 low, 1 high):
    a request meets ``ratio x v <= ms`` exactly when ``v <= ms / ratio``."""
    out = []
    for m, ms in slo.goodput_ms:
        pair = r.get(m)
        out.append((m, ms if pair is None else ms / pair[edge]))
    return tuple(out)


def plan_bands(slo: Slo, r: Ratios, achieved: Mapping[str, float],
               goodput_band: Pair | None, output_tokens_per_s: float | None,
               output_definition: str = "run", unsampled: tuple[str, ...] = ()) -> PlanBands:
    """Bands of a candidate's predicted SLO terms (``achieved``, the raw prediction) and of
    its output rate; ``goodput_band`` = (share at the pessimistic edge, at the optimistic);
    a term in ``unsampled`` (no judged request has a value of it) has no band."""
    checks = [_bound_check(b.key, b.limit_ms, achieved[b.key], r.get(b.metric),
                           r.basis_of(b.metric)) if b.key not in unsampled
              else SloCheck(key=b.key, basis=r.basis_of(b.metric), limit=b.limit_ms,
                            value=achieved[b.key], band=None, met=True, edge=None,
                            met_at_edge=None, sampled=False)
              for b in slo.bounds if b.key in achieved]
    if slo.goodput_ms and "goodput_share" in achieved:
        share = achieved["goodput_share"]
        bases = sorted({r.basis_of(m) for m, _ in slo.goodput_ms})
        checks.append(SloCheck(
            key="goodput_share", basis="; ".join(bases), limit=slo.goodput_target,
            value=share, band=goodput_band,
            met=share >= slo.goodput_target,
            edge=None if goodput_band is None else goodput_band[0],
            met_at_edge=None if goodput_band is None else goodput_band[0] >= slo.goodput_target))
    tput = r.get("output_tokens_per_s")
    return PlanBands(checks=tuple(checks), output_tokens_per_s=output_tokens_per_s,
                     output_tokens_per_s_band=None if tput is None or output_tokens_per_s is None
                     else (output_tokens_per_s * tput[0], output_tokens_per_s * tput[1]),
                     basis=r.basis, notes=r.notes,
                     output_basis=r.basis_of("output_tokens_per_s"),
                     output_definition=output_definition)


def _bound_check(key: str, limit: float, value: float, pair: Pair | None,
                 basis: str) -> SloCheck:
    band = None if pair is None else (value * pair[0], value * pair[1])
    edge = None if band is None else band[1]
    return SloCheck(key=key, basis=basis, limit=limit, value=value, band=band, met=value <= limit,
                    edge=edge, met_at_edge=None if edge is None else edge <= limit)


def goodput_band(lat: Any, slo: Slo, r: Ratios) -> Pair | None:
    """(share at the pessimistic edge, share at the optimistic edge) of the judged requests
    meeting every goodput bound (``lat``: judge.Latencies); None without goodput or bands."""
    from kvplan.analysis.plan.judge import goodput_share, judged_mask

    if not slo.goodput_ms or all(r.get(m) is None for m, _ in slo.goodput_ms):
        return None
    keep = judged_mask(lat, slo)
    return (goodput_share(lat, keep, scaled_goodput(slo, r, 1)),
            goodput_share(lat, keep, scaled_goodput(slo, r, 0)))
