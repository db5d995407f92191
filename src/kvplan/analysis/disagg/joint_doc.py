"""The `joint` document of `kvplan plan --disagg --json`: one answer over aggregated and
disaggregated candidates (the CLI prints it as text, the web Plan page shows it)."""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from kvplan.specs.disagg import pool_label
from kvplan.units import counted

if TYPE_CHECKING:
    from kvplan.analysis.disagg.candidates import JointCandidate, JointPlan, JointSide

PRICE_NOTE = ("each pool rents its own instances (the provider's cheapest shape), a node "
              "link's fleet (NVLink, PCIe) one rental whose node holds both pools; the KV "
              "link adds $0: NICs are taken to be part of the instance price")


def describe(c: JointCandidate) -> str:
    """One candidate in words (its kind, GPUs, TP, counts, link)."""
    if c.kind == "aggregated":
        assert c.aggregated is not None
        d = c.aggregated.deployment
        e = d.engine
        dp = (f" DP{e.data_parallel_size}" if e.data_parallel_size > 1 else "") + (
            " EP" if e.enable_expert_parallel else "")
        return (f"{c.id} aggregated: {c.aggregated.replicas or '?'} x {d.gpu.id} TP"
                f"{e.tensor_parallel_size}{dp}")
    assert c.disagg is not None
    dd = c.disagg
    return (f"{c.id} {dd.label}: prefill {dd.prefill.replicas} x {dd.prefill.gpu.id} "
            f"{pool_label(dd.prefill)}, decode {dd.decode.replicas} x {dd.decode.gpu.id} "
            f"{pool_label(dd.decode)}, over {dd.link.id}")


def usd(x: float | None) -> str:
    return "unpriced" if x is None else f"${x:,.2f}/h"


def versus(j: JointPlan) -> str:
    """Which kind wins and why, with the figures that decide it."""
    win, dis, agg = j.winner, j.best_disagg, j.aggregated_best
    if win is None:
        return "nothing in the joint space meets the SLO"
    if win.kind == "disaggregated":
        rival = f"the aggregated winner {describe(agg)} {usd(agg.usd_per_hour)}" if agg else \
            "no aggregated configuration meets the SLO"
        return f"disaggregated wins: {describe(win)} at {usd(win.usd_per_hour)}; {rival}"
    if dis is not None:
        return (f"aggregated wins: {describe(win)} at {usd(win.usd_per_hour)}; the cheapest "
                f"verified disaggregated fleet {describe(dis)} costs {usd(dis.usd_per_hour)}")
    priced = [c for c in j.candidates if c.kind == "disaggregated"
              and c.usd_per_hour is not None and c.stage not in ("pruned_memory", "invalid")]
    if not any(c.kind == "disaggregated" for c in j.candidates):
        return (f"aggregated wins: {describe(win)}; the space holds no disaggregated fleet: "
                f"every pair of pools breaks a fleet rule (the decode TP a multiple of the "
                f"prefill TP; a node link such as nvlink4 joins at most 8 GPUs in all, and "
                f"only the GPUs that have it)")
    if not priced:
        bad = [c for c in j.candidates if c.kind == "disaggregated" and c.stage == "invalid"]
        why = f" or can run ({bad[0].id}: {bad[0].reason})" if bad else ""
        return f"aggregated wins: {describe(win)}; no disaggregated fleet fits in memory{why}"
    cheapest = min(priced, key=lambda c: c.key)
    assert cheapest.usd_per_hour is not None and win.usd_per_hour is not None
    if cheapest.usd_per_hour >= win.usd_per_hour:
        return (f"aggregated wins: {describe(win)} at {usd(win.usd_per_hour)} on "
                f"{counted(win.gpus, 'GPU')}; every disaggregated fleet costs at least "
                f"{usd(cheapest.usd_per_hour)} ({cheapest.gpus} GPUs, {cheapest.id})")
    missed = [c for c in priced if c.usd_per_hour is not None
              and c.usd_per_hour < win.usd_per_hour]
    stages = Counter(c.stage for c in missed)
    return (f"aggregated wins: {describe(win)} at {usd(win.usd_per_hour)}; the "
            f"{len(missed)} cheaper disaggregated fleets miss the SLO ("
            + ", ".join(f"{n} {s}" for s, n in sorted(stages.items())) + ")")


def _intervals(c: JointCandidate) -> dict[str, list[float | None]]:
    assert c.verdict is not None
    return {k: [None if v.low is None or math.isnan(v.low) else v.low, v.high]
            for k, v in c.verdict.intervals}


def disagg_json(c: JointCandidate, side: JointSide) -> dict[str, Any]:
    """A verified disaggregated fleet: config, cost, achieved, noise, bands, binding, lines."""
    from kvplan.analysis.disagg.joint_levers import binding_phase, disagg_bands
    from kvplan.analysis.disagg.plan import serve_lines

    assert c.disagg is not None and c.verdict is not None
    phase, why = binding_phase(c, side.slo)
    bands = disagg_bands(c, side.slo)
    return {**_one(c), "achieved": dict(c.verdict.achieved),
            "margins": dict(c.verdict.margins), "judged_requests": c.verdict.judged_requests,
            "intervals": _intervals(c), "within_noise": list(c.verdict.within_noise),
            "binding": {"primary": phase, "why": why},
            "slo_at_band_edge": [{"key": k.key, "value": k.value, "band": k.band,
                                  "edge": k.edge, "met_at_edge": k.met_at_edge,
                                  "band_basis": k.basis} for k in bands.checks],
            "output_tokens_per_s": bands.output_tokens_per_s,
            "output_tokens_per_s_band": bands.output_tokens_per_s_band,
            "serve": {**serve_lines(c.disagg, side.model_id), "bench": side.bench}}


def _one(c: JointCandidate) -> dict[str, Any]:
    row: dict[str, Any] = {"id": c.id, "kind": c.kind, "stage": c.stage, "reason": c.reason,
                           "usd_per_hour": c.usd_per_hour, "gpus": c.gpus}
    if c.disagg is not None:
        d = c.disagg
        row.update({"fleet": d.label, "kv_link": d.link.id, **{role: {
            "gpu": p.gpu.id, "instances": p.replicas,
            "tensor_parallel_size": p.engine.tensor_parallel_size,
            "data_parallel_size": p.engine.data_parallel_size,
            "enable_expert_parallel": p.engine.enable_expert_parallel}
            for role, p in (("prefill", d.prefill), ("decode", d.decode))}})
    elif c.aggregated is not None:
        d2 = c.aggregated.deployment
        row.update({"gpu": d2.gpu.id, "tensor_parallel_size": d2.engine.tensor_parallel_size,
                    "data_parallel_size": d2.engine.data_parallel_size,
                    "enable_expert_parallel": d2.engine.enable_expert_parallel,
                    "replicas": c.aggregated.replicas})
    return row


def joint_json(side: JointSide) -> dict[str, Any]:
    """One answer over both kinds; every candidate carries its ``kind``."""
    j = side.joint
    dis = j.best_disagg
    return {"search": j.search, "simulations": j.simulations, "price_note": PRICE_NOTE,
            "winner": None if j.winner is None else _one(j.winner),
            "winner_kind": None if j.winner is None else j.winner.kind,
            "versus": versus(j),
            "best_disaggregated": None if dis is None else disagg_json(dis, side),
            "levers": [{"change": r.change, "fleet": r.label, "usd_per_hour": r.usd_per_hour,
                        "delta_usd_per_hour": r.delta_usd_per_hour,
                        "binding_key": r.binding_key,
                        "binding_ms": None if math.isnan(r.binding_ms) else r.binding_ms,
                        "delta_binding_ms": None if math.isnan(r.delta_binding_ms)
                        else r.delta_binding_ms, "meets_slo": r.meets_slo, "note": r.note}
                       for r in side.levers],
            "stages": dict(sorted(Counter(f"{c.kind}:{c.stage}"
                                          for c in j.candidates).items())),
            "candidates": [_one(c) for c in j.candidates]}
