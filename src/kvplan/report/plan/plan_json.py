"""A Plan as one strict JSON object (schema ``kvplan.plan/v1``; keys in docs/planner.md)."""

from __future__ import annotations

import math
from typing import Any

from kvplan.analysis.plan.bands import (
    OUTPUT_DEFINITIONS,
    PlanBands,
    SloCheck,
)
from kvplan.analysis.plan.levers import load_per_replica
from kvplan.analysis.plan.records import Binding, Candidate, CapacityInfo, FleetInfo, Lever, Plan
from kvplan.analysis.plan.why.verdict import closest
from kvplan.costs.pricing import FleetCost
from kvplan.specs.prices import PriceRow

SCHEMA = "kvplan.plan/v1"


def plan_json(p: Plan) -> dict[str, Any]:
    """Everything the plan decided, with units in the key names; no NaN or Infinity."""
    doc = {
        "schema": SCHEMA,
        "kvplan_version": _version(),
        "seed": p.seed,
        "inputs": _inputs(p),
        "summary": _summary(p),
        "candidates": [_candidate(c) for c in p.candidates],
        "levers": [_lever(x) for x in p.levers],
        "search_report": _report(p),
        "warnings": list(p.warnings),
    }
    out: dict[str, Any] = _finite(doc)
    return out


def _version() -> str:
    from kvplan import __version__

    return __version__


def _inputs(p: Plan) -> dict[str, Any]:
    return {
        "model": p.model, "workload": p.workload, "requests": p.requests,
        "sample_requests": p.sample_requests, "mode": p.mode,
        "target_rate_rps": p.target_rate_rps,
        "slo": {
            "bounds": [{"metric": b.metric, "percentile": b.percentile, "limit_ms": b.limit_ms,
                        "key": b.key} for b in p.slo.bounds],
            "goodput_ms": dict(p.slo.goodput_ms), "goodput_target": p.slo.goodput_target,
            "warmup_fraction": p.slo.warmup.fraction, "text": p.slo.text,
            "margin": p.slo_margin},
        "prices": {"provider": p.prices.provider,
                   "rows": [price_row_json(r) for r in p.prices.rows]},
    }


def _summary(p: Plan) -> dict[str, Any]:
    w = p.winner
    served = {"verified_requests": p.requests, "trace_requests": p.trace_requests,
              "verified_share": p.requests / p.trace_requests if p.trace_requests else None}
    if w is None:
        return {"status": p.status, "why": p.infeasible_why, "advice": p.advice,
                "closest": [_closest(c, cm) for cm, c in closest(p.candidates)[:CLOSEST]],
                **served}
    f = w.fleet
    return {
        "status": p.status, "best": w.id, "usd_per_hour": w.usd_per_hour,
        "usd_per_million_output_tokens": w.usd_per_million_output_tokens,
        "replicas": w.replicas, "gpus": (w.replicas or 0) * w.deployment.gpus_per_replica,
        "capacity_rps_per_replica": load_per_replica(w, p.target_rate_rps),
        "capacity_method": w.capacity.method if w.capacity else None, **served,
        "judged_requests": None if f is None else f.judged_requests,
        "intervals": None if f is None else {k: list(v) for k, v in f.intervals},
        "within_noise": None if f is None else list(f.within_noise),
        "binding": w.binding.primary if w.binding else None,
        "one_line_why": w.binding.why if w.binding else "",
        "vllm_serve": p.serve_command, "vllm_bench_serve": p.bench_command,
        "slo_margin": p.slo_margin, **({} if w.bands is None else bands_json(w.bands)),
        "without_margin": _without(p),
    }


CLOSEST = 3
"""Closest candidates listed in an infeasible answer."""


def _closest(c: Candidate, miss: tuple[str, float, float | None]) -> dict[str, Any]:
    """One near miss: its configuration, the term it misses, by how much, where."""
    key, margin, got = miss
    e = c.deployment.engine
    return {"id": c.id, "stage": c.stage, "gpu": c.deployment.gpu.id,
            "tensor_parallel_size": e.tensor_parallel_size,
            "data_parallel_size": e.data_parallel_size,
            "enable_expert_parallel": e.enable_expert_parallel, "kv_cache_dtype": e.kv_cache_dtype,
            "quantization": e.quantization, "max_num_seqs": e.max_num_seqs,
            "max_num_batched_tokens": e.max_num_batched_tokens, "misses": key,
            "margin": margin, "achieved": got,
            "replicas": c.fleet.replicas if c.fleet else (
                c.capacity.replicas_failing if c.capacity else None),
            "reason": c.reason}


def bands_json(b: PlanBands) -> dict[str, Any]:
    """The predicted SLO terms with ``*_band`` keys ([low, high], the term's own unit; null
    where no residuals bound it), the output rate's band, the basis and the notes."""
    out: dict[str, Any] = {}
    for c in b.checks:
        out[c.key] = c.value
        out[f"{c.key}_band"] = None if c.band is None else list(c.band)
    band = b.output_tokens_per_s_band
    return {**out, "output_tokens_per_s": b.output_tokens_per_s,
            "output_tokens_per_s_band": None if band is None else list(band),
            "output_tokens_per_s_band_basis": b.output_basis,
            "output_tokens_per_s_definition": OUTPUT_DEFINITIONS[b.output_definition],
            **_priced(b),
            "band_basis": b.basis, "calibration_notes": list(b.notes),
            "met_at_band_edge": b.robust,
            "slo_at_band_edge": [_check(c) for c in b.checks]}


def _priced(b: PlanBands) -> dict[str, Any]:
    """The output rate $/M out tok is priced at, and what it is."""
    if b.priced_output_tokens_per_s is None:
        return {"priced_output_tokens_per_s": b.output_tokens_per_s,
                "priced_output_tokens_per_s_definition": "output_tokens_per_s"}
    return {"priced_output_tokens_per_s": b.priced_output_tokens_per_s,
            "priced_output_tokens_per_s_definition": b.priced_definition}


def _check(c: SloCheck) -> dict[str, Any]:
    return {"key": c.key, "band_basis": c.basis, "limit": c.limit, "value": c.value,
            "band": None if c.band is None else list(c.band), "met": c.met,
            "edge": c.edge, "met_at_edge": c.met_at_edge, "sampled": c.sampled}


def _without(p: Plan) -> dict[str, Any] | None:
    """With --slo-margin band: the winner of the same search without the margin."""
    b, w = p.without_margin, p.winner
    if b is None or w is None:
        return None
    extra = None if b.usd_per_hour is None or w.usd_per_hour is None else (
        w.usd_per_hour - b.usd_per_hour)
    return {"best": b.id, "gpu": b.deployment.gpu.id,
            "tensor_parallel_size": b.deployment.engine.tensor_parallel_size,
            "replicas": b.replicas, "usd_per_hour": b.usd_per_hour,
            "usd_per_million_output_tokens": b.usd_per_million_output_tokens,
            "margin_usd_per_hour": extra}


def _candidate(c: Candidate) -> dict[str, Any]:
    d, e = c.deployment, c.deployment.engine
    return {
        "id": c.id, "stage": c.stage, "reason": c.reason, "gpu": d.gpu.id,
        "tensor_parallel_size": e.tensor_parallel_size,
        "pipeline_parallel_size": e.pipeline_parallel_size,
        "data_parallel_size": e.data_parallel_size,
        "enable_expert_parallel": e.enable_expert_parallel,
        "kv_cache_dtype": e.kv_cache_dtype, "quantization": e.quantization,
        "max_num_seqs": e.max_num_seqs, "max_num_batched_tokens": e.max_num_batched_tokens,
        "block_size": e.block_size, "enable_prefix_caching": e.enable_prefix_caching,
        "max_model_len": e.max_model_len, "router": d.router,
        "kv_cache_tokens": c.kv_cache_tokens,
        "ceilings_rps": dict(c.ceilings_rps), "zero_load_margins": dict(c.zero_load_margins),
        "optimistic_replicas": c.optimistic_replicas,
        "optimistic_usd_per_hour": c.optimistic_usd_per_hour,
        "capacity": None if c.capacity is None else _capacity(c.capacity),
        "replicas": c.replicas, "cost": None if c.cost is None else _cost(c.cost),
        "usd_per_million_output_tokens": c.usd_per_million_output_tokens,
        "fleet": None if c.fleet is None else _fleet(c.fleet),
        "fleet_one_fewer": None if c.fleet_one_fewer is None else _fleet(c.fleet_one_fewer),
        "binding": None if c.binding is None else _binding(c.binding),
        "bands": None if c.bands is None else bands_json(c.bands),
    }


def _capacity(x: CapacityInfo) -> dict[str, Any]:
    return {"rate_rps": x.rate_rps, "bracket_rps": list(x.bracket_rps), "probes": x.probes,
            "binding_slo": x.binding_slo, "margins_at_hi": dict(x.margins_at_hi),
            "achieved_at_hi": dict(x.achieved_at_hi),
            "achieved_at_capacity": dict(x.achieved_at_capacity),
            "goodput_share_band": None if x.goodput_share_band is None
            else list(x.goodput_share_band), "peak_kv_usage": x.peak_kv_usage,
            "preemptions": x.preemptions, "seqs_capped_share": x.seqs_capped_share,
            "budget_full_share": x.budget_full_share,
            "prefill_token_share": x.prefill_token_share,
            "prefill_kv_share": x.prefill_kv_share, "method": x.method,
            "replicas": x.replicas, "replicas_failing": x.replicas_failing,
            "shares_simulated": x.shares_simulated, "share_requests": x.share_requests}


def _cost(x: FleetCost) -> dict[str, Any]:
    return {"usd_per_hour": x.usd_per_hour, "usd_per_month": x.usd_per_hour * 730,
            "instances": x.instances, "instance": x.row.instance,
            "gpus_per_instance": x.row.gpus_per_instance,
            "usd_per_instance_hour": x.row.usd_per_instance_hour,
            "gpus_rented": x.gpus_rented, "idle_gpus": x.idle_gpus,
            "source_url": x.row.source_url, "observed_on": x.row.observed_on,
            "also": [{"instance": r.instance, "instances": n,
                      "gpus_per_instance": r.gpus_per_instance,
                      "usd_per_instance_hour": r.usd_per_instance_hour} for r, n in x.also]}


def _fleet(x: FleetInfo) -> dict[str, Any]:
    return {"replicas": x.replicas, "meets_slo": x.ok, "achieved": dict(x.achieved),
            "margins": dict(x.margins), "output_tokens_per_s": x.output_tokens_per_s,
            "goodput_share_band": None if x.goodput_share_band is None
            else list(x.goodput_share_band),
            "peak_kv_usage": x.peak_kv_usage, "preemptions": x.preemptions,
            "requests_per_replica": list(x.requests_per_replica),
            "judged_requests": x.judged_requests,
            "achieved_all_requests": dict(x.achieved_all_requests),
            "intervals": {k: list(v) for k, v in x.intervals},
            "within_noise": list(x.within_noise)}


def _binding(b: Binding) -> dict[str, Any]:
    return {"primary": b.primary, "evidence": dict(b.evidence), "why": b.why}


def _lever(x: Lever) -> dict[str, Any]:
    return {"change": x.change, "capacity_rps": x.capacity_rps,
            "delta_capacity_pct": x.delta_capacity_pct, "replicas": x.replicas,
            "delta_replicas": x.delta_replicas, "usd_per_hour": x.usd_per_hour,
            "delta_usd_per_hour": x.delta_usd_per_hour, "binding_p99_ms": x.binding_p99_ms,
            "delta_binding_p99_ms": x.delta_binding_p99_ms,
            "binding_p99_ms_band": None if x.binding_p99_ms_band is None
            else list(x.binding_p99_ms_band), "binding_key": x.binding_key,
            "verified": x.verified, "note": x.note}


def price_row_json(r: PriceRow) -> dict[str, Any]:
    return {"gpu": r.gpu, "provider": r.provider, "instance": r.instance,
            "gpus_per_instance": r.gpus_per_instance, "gpus_per_node": r.gpus_per_node,
            "usd_per_instance_hour": r.usd_per_instance_hour,
            "usd_per_gpu_hour": r.usd_per_gpu_hour, "source_url": r.source_url,
            "observed_on": r.observed_on, "transcribed_by": r.transcribed_by,
            "override": r.override}


def _report(p: Plan) -> dict[str, Any]:
    r = p.report
    return {"search": r.search, "executor": r.executor, "workers": r.workers,
            "enumerated": r.enumerated, "stages": dict(r.stage_counts),
            "capacity_searches": r.capacity_searches, "fleet_simulations": r.fleet_simulations,
            "probes": r.probes, "sim_requests": r.sim_requests, "wall_s": r.wall_s}


def _finite(x: Any) -> Any:
    """Replace non-finite floats by None so the document is strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x
