"""One search space for aggregated and disaggregated serving: candidates of both kinds ranked
by one key, the disaggregated ones screened by safe bounds and verified by simulation.

    rank key   ($/hour, kind: aggregated before disaggregated, GPUs, enumeration index)
    aggregated      the aggregated planner's candidates as it left them (its own funnel)
    disaggregated   memory (exact) -> zero-load floors -> work bounds (work_bounds) ->
                    simulated in rank-key order, rounds of ROUND (rounds.py), until the next
                    key is above the best verified one (the aggregated winner's counts),
                    the rest 'pruned_cost'
``search='exhaustive'`` skips the floors, the work bounds and the stopping rule: every
memory-feasible fleet is simulated; tests check that both give the same winner.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from kvplan.analysis.disagg.candidates import JointCandidate, JointPlan
from kvplan.analysis.disagg.rounds import ROUND, simulate_round
from kvplan.analysis.disagg.screen import Screened, screen_fleets
from kvplan.analysis.plan.records import Plan
from kvplan.costs.step.roofline import Profile
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.links import LinkSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.prices import PriceTable
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.slo import Slo


def aggregated_entries(plan: Plan) -> list[JointCandidate]:
    """The aggregated planner's candidates, as members of the joint space."""
    out = []
    for i, c in enumerate(plan.candidates):
        gpus = c.deployment.gpus_per_replica * (c.replicas or 1)
        out.append(JointCandidate(id=c.id, kind="aggregated", stage=c.stage, reason=c.reason,
                                  gpus=gpus, usd_per_hour=c.usd_per_hour, index=i,
                                  aggregated=c))
    return out


def joint_search(plan: Plan, fleets: Sequence[DisaggDeployment], work: Workload, slo: Slo,
                 prices: PriceTable, *, search: str = "funnel",
                 workers: int | None = None, limits: Limits = (None, None),
                 profile: str | Profile | None = None, margin: str = "none") -> JointPlan:
    """Rank ``plan``'s candidates and the ``fleets`` in one space (module docstring);
    ``limits``: --max-gpus and --max-cost-per-hour, which bind a fleet as a replica set;
    ``profile``, ``margin``: --profile and --slo-margin, as the aggregated candidates were
    priced and judged (the screen keeps the user's SLO: looser than the edge, so safe)."""
    agg = aggregated_entries(plan)
    best = next((c for c in agg if plan.winner is not None and c.id == plan.winner.id), None)
    screened = within(screen_fleets(fleets, work, slo, prices,
                                    bounds=search != "exhaustive", profile=profile), limits)
    done, sims = _simulate(screened, work, slo, best, stop=search != "exhaustive",
                           workers=workers, profile=profile, margin=margin)
    every = agg + done
    # the aggregated side is represented by its own winner (its ranking and tie-breaks)
    ok = ([best] if best is not None else []) + [c for c in done if c.verified]
    return JointPlan(candidates=tuple(every), winner=min(ok, key=lambda c: c.key) if ok
                     else None, search=search, simulations=sims, aggregated_best=best)


Limits = tuple[int | None, float | None]
"""(--max-gpus, --max-cost-per-hour), None where not given."""


def within(screened: Screened, limits: Limits) -> Screened:
    """The kept fleets that break --max-gpus or --max-cost-per-hour dropped, as the aggregated
    funnel drops such candidates (``pruned_bound``, with the limit)."""
    max_gpus, max_usd = limits
    kept, dropped = [], list(screened.dropped)
    for c in screened.kept:
        why = ""
        if max_gpus is not None and c.gpus > max_gpus:
            why = f"needs {c.gpus} GPUs > --max-gpus {max_gpus}"
        elif max_usd is not None and c.usd_per_hour is not None and c.usd_per_hour > max_usd:
            why = f"costs ${c.usd_per_hour:.2f}/h > --max-cost-per-hour {max_usd}"
        if why:
            dropped.append(replace(c, stage="pruned_bound", reason=why))
        else:
            kept.append(c)
    return Screened(kept=tuple(kept), dropped=tuple(dropped))


def _simulate(screened: Screened, work: Workload, slo: Slo, best: JointCandidate | None,
              *, stop: bool, workers: int | None, profile: str | Profile | None = None,
              margin: str = "none") -> tuple[list[JointCandidate], int]:
    """Rounds of ROUND in rank order; before each, what cannot beat the best is pruned."""
    out = list(screened.dropped)
    todo = sorted(screened.kept, key=lambda c: c.key)
    sims = 0
    while todo:
        if stop and best is not None:
            out += [_priced_out(c, best) for c in todo if c.key > best.key]
            todo = [c for c in todo if c.key <= best.key]
        batch, todo = todo[:ROUND], todo[ROUND:]
        fleets = [c.disagg for c in batch if c.disagg is not None]
        judged = simulate_round(fleets, work, slo, workers, profile, margin)
        for c, (v, run) in zip(batch, judged, strict=True):
            sims += 1
            why = ("meets the SLO" if v.ok else "misses the SLO") + \
                f"; binding {v.binding} (margin {v.margin:+.1%})"
            done = replace(c, stage="verified" if v.ok else "infeasible", reason=why,
                           verdict=v, run=run)
            out.append(done)
            if v.ok and (best is None or done.key < best.key):
                best = done
    return out, sims


def _priced_out(c: JointCandidate, best: JointCandidate) -> JointCandidate:
    why = (f"costs at least ${c.usd_per_hour:,.2f}/h; {best.id} ({best.kind}) is verified at "
           f"${best.usd_per_hour:,.2f}/h")
    return replace(c, stage="pruned_cost", reason=why)


def plan_joint(plan: Plan, model: ModelSpec, work: Workload, slo: Slo, *,
               gpus: Sequence[HardwareSpec], tps: Sequence[int], links: Sequence[LinkSpec],
               max_instances: int = 4, search: str = "funnel",
               workers: int | None = None, async_scheduling: bool = False,
               dps: Sequence[int] = (1,), eps: Sequence[bool | None] = (None,),
               limits: Limits = (None, None), kv_cache_dtypes: Sequence[str] = ("auto",),
               quantizations: Sequence[str | None] = (None,),
               engine_lists: Mapping[str, Sequence[Any]] | None = None,
               gpu_memory_utilization: float = 0.9,
               max_model_len: int | None = None,
               profile: str | Profile | None = None, margin: str = "none") -> JointPlan:
    """The joint search over ``plan`` (kvplan.plan's answer on ``work``) and every xPyD
    fleet of ``gpus`` x ``gpus`` (prefill, decode) x layout pairs (TP; DP / EP of ``dps``,
    ``eps`` for an MoE model: plan.pool_layouts) x 1..``max_instances`` each x ``links``,
    at ``max_model_len`` (None: the longest request) and ``gpu_memory_utilization``, as the
    aggregated planner (``async_scheduling``: vLLM --async-scheduling on every pool, as on its
    candidates), for every KV cache dtype, weight format and combination of the other engine
    flags of the plan's space (``engine_lists``: EngineConfig field -> values, e.g. the
    --block-size list; both pools the same)."""
    from kvplan.analysis.disagg.plan import enumerate_disagg

    longest = int(np.max(work.prompt_tokens + work.output_tokens))
    lists = {"kv_cache_dtype": kv_cache_dtypes, "quantization": quantizations,
             **(engine_lists or {})}
    engines = list(dict.fromkeys(EngineConfig(
        max_model_len=max_model_len or min(longest, model.max_position_embeddings),
        gpu_memory_utilization=gpu_memory_utilization, async_scheduling=async_scheduling,
        **dict(zip(lists, combo, strict=True))) for combo in itertools.product(*lists.values())))
    fleets = [f for link in links for engine in engines for f in enumerate_disagg(
        model, gpus, engine, link, tps=tps, max_instances=max_instances, dps=dps, eps=eps)]
    return joint_search(plan, fleets, work, slo, plan.prices, search=search, workers=workers,
                        limits=limits, profile=profile, margin=margin)
