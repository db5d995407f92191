"""The plan's error bands attached to its candidates and levers (plan_bands does the maths).

A verified candidate's bands come from its simulated fleet (target mode) or from its
capacity probe (capacity mode: the SLO terms at the capacity rate, output rate = capacity x
mean output tokens); ``band_of`` scales one lever's binding percentile.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.analysis.plan.bands import (
    PlanBands,
    plan_bands,
    priced_unit,
    ratios_for,
)
from kvplan.analysis.plan.records import Candidate, Lever
from kvplan.specs.deployment import Deployment
from kvplan.specs.slo import Slo


def candidate_bands(c: Candidate, slo: Slo, mean_output_tokens: float) -> PlanBands | None:
    """Bands of the candidate's predicted answer; None when nothing was predicted for it."""
    r = ratios_for(c.deployment)
    if c.fleet is not None:
        return replace(plan_bands(slo, r, dict(c.fleet.achieved), c.fleet.goodput_share_band,
                                  c.fleet.output_tokens_per_s, unsampled=c.fleet.unsampled),
                       priced_output_tokens_per_s=c.fleet.priced()[0],
                       priced_definition=c.fleet.priced()[1])
    cap = c.capacity
    if c.stage != "verified" or cap is None or not cap.achieved_at_capacity:
        return None
    one = cap.rate_rps * mean_output_tokens
    b = plan_bands(slo, r, dict(cap.achieved_at_capacity), cap.goodput_share_band, one,
                   output_definition="sustained", unsampled=cap.unsampled_at_capacity)
    n = c.replicas or 1  # $/M: the rented unit's $/hour over the n replicas it holds
    return b if n == 1 else replace(b, priced_output_tokens_per_s=n * one,
                                    priced_definition=priced_unit(n))


def with_bands(c: Candidate, slo: Slo, mean_output_tokens: float) -> Candidate:
    b = candidate_bands(c, slo, mean_output_tokens)
    return c if b is None else replace(c, bands=b)


def band_of(value: float | None, d: Deployment, key: str | None, slo: Slo
            ) -> tuple[float, float] | None:
    """The band of a percentile ``value`` under the SLO key ``key`` for a replica of ``d``."""
    metric = next((b.metric for b in slo.bounds if b.key == key), None)
    pair = None if metric is None else ratios_for(d).get(metric)
    if value is None or pair is None:
        return None
    return value * pair[0], value * pair[1]


def lever_with_band(x: Lever, d: Deployment, key: str | None, slo: Slo) -> Lever:
    return replace(x, binding_p99_ms_band=band_of(x.binding_p99_ms, d, key, slo))
