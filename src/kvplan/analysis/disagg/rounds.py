"""Simulate disaggregated candidates in rounds of ROUND, in worker processes (fork) or here;
results in submission order, so the answer does not depend on the worker count."""

from __future__ import annotations

import os
from collections.abc import Sequence

from kvplan.analysis.disagg.serving import DisaggRun, simulate_disagg_serving
from kvplan.analysis.plan.bands import Ratios, edge_slo, ratios_for
from kvplan.analysis.plan.judge import Verdict, judge, latencies
from kvplan.costs.step.roofline import Profile
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo

ROUND = 4
"""Candidates simulated per round (fixed, as the aggregated funnel's rounds)."""

_SHARED: dict[str, tuple[Workload, Slo, str | Profile | None, str]] = {}


def fleet_slo(dd: DisaggDeployment, slo: Slo, margin: str = "none") -> Slo:
    """The SLO the fleet is judged by: the user's, or with --slo-margin band its band-edge
    version (each bound over the fleet's high ratio, ``disagg_ratios``), as
    the aggregated candidates are judged (``JobContext.slo_for``)."""
    if margin == "none":
        return slo
    return edge_slo(slo, disagg_ratios(dd))


def disagg_ratios(dd: DisaggDeployment) -> Ratios:
    """TTFT's band from the prefill pool's replica, every other metric's from the decode's."""
    pre, dec = ratios_for(dd.prefill), ratios_for(dd.decode)
    pairs = tuple((m, pre.get(m) if m == "ttft" else dec.get(m)) for m, _ in dec.ratios)
    bases = tuple((m, pre.basis_of(m) if m == "ttft" else dec.basis_of(m))
                  for m, _ in dec.ratios)
    return Ratios(ratios=pairs, basis=dec.basis, notes=pre.notes + dec.notes, bases=bases)


def simulate_one(dd: DisaggDeployment, work: Workload, slo: Slo,
                 profile: str | Profile | None = None, margin: str = "none"
                 ) -> tuple[Verdict, DisaggRun]:
    """One fleet simulated on ``work`` (steps priced by ``profile``, None: the bundled one)
    and judged by ``slo`` (at the band's edge with ``margin`` 'band': ``fleet_slo``)."""
    run = simulate_disagg_serving(dd, work, profile=profile)
    return judge(latencies(run.result.client, itl=slo.judges_itl),
                 fleet_slo(dd, slo, margin)), run


def _job(dd: DisaggDeployment) -> tuple[Verdict, DisaggRun]:
    work, slo, profile, margin = _SHARED["ctx"]
    return simulate_one(dd, work, slo, profile, margin)


def simulate_round(fleets: Sequence[DisaggDeployment], work: Workload, slo: Slo,
                   workers: int | None = None, profile: str | Profile | None = None,
                   margin: str = "none") -> list[tuple[Verdict, DisaggRun]]:
    """Every fleet of one round, ``workers`` processes at most (None: one per core)."""
    n = min(len(fleets), workers or os.cpu_count() or 1)
    if n <= 1:
        return [simulate_one(dd, work, slo, profile, margin) for dd in fleets]
    import multiprocessing as mp

    # forked workers inherit it: the traffic is not pickled
    _SHARED["ctx"] = (work, slo, profile, margin)
    try:
        with mp.get_context("fork").Pool(n) as pool:
            return pool.map(_job, list(fleets), chunksize=1)
    finally:
        _SHARED.pop("ctx", None)
