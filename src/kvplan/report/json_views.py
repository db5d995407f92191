"""The JSON answer of every command, built once: the CLI prints it, the web API serves it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.analysis.footprint import LeverRow
    from kvplan.analysis.kv_view import KvReport
    from kvplan.analysis.metrics import Metrics
    from kvplan.costs.memory.plan import MemoryPlan
    from kvplan.costs.step.latency import LatencyResult, SweepRow
    from kvplan.costs.step.roofline import Profile, StepCost
    from kvplan.costs.step.uncertainty import Deployment
    from kvplan.sim.result import SimulationResult


def models_json() -> dict[str, Any]:
    """`kvplan models --json`: the bundled catalog, and the published checkpoints resolved to
    one of its architectures (``derived``: id -> the catalog id whose config it takes)."""
    from kvplan.analysis.catalog_view import catalog_rows
    from kvplan.specs.catalog.derived import listed

    return {"models": [r._asdict() for r in catalog_rows()],
            "derived": {d.id: d.base for d in listed()}}


def kv_json(report: KvReport) -> dict[str, Any]:
    """`kvplan kv --json`: bytes per token and groups, plus the formula lines the text shows."""
    from kvplan.report.explain import kv_summary_lines

    return {**report.to_json(), "formula": kv_summary_lines(report.whole),
            "formula_per_gpu": kv_summary_lines(report.per_gpu)}


def kernel_tables_of(gpu_id: str) -> str | None:
    """The measured GPU whose kernel tables price ``gpu_id`` (itself, or its ``kernels_of``
    twin); None: the roofline prices it (and DP / EP steps are refused on it)."""
    from kvplan.costs.kernels.tables import resolve_gpu
    from kvplan.errors import UnknownNameError

    try:
        return resolve_gpu(gpu_id)
    except UnknownNameError:
        return None


def gpus_json() -> dict[str, Any]:
    """`kvplan gpus --json`: the bundled hardware catalog."""
    from kvplan.costs.kernels.donor import rates_donor
    from kvplan.costs.memory.vllm_defaults import cuda_total_bytes
    from kvplan.specs.hardware import gpu_catalog

    return {
        "gpus": [
            {
                "id": g.id,
                "memory_bytes": g.memory_bytes,
                "cuda_total_bytes": cuda_total_bytes(g),
                "mem_bw_bytes_per_s": g.mem_bw_bytes_per_s,
                "peak_flops": g.peak_flops,
                "interconnect": g.interconnect,
                "interconnect_bytes_per_s": round(g.interconnect_bytes_per_s) or None,
                "bridge_gpus": g.bridge_gpus or None,
                "pcie_bytes_per_s": round(g.pcie_bytes_per_s) or None,
                "arch": g.arch or None,
                "node_gpus": g.node_gpus or None,
                "scale_out_bytes_per_s": g.scale_out_bytes_per_s or None,
                "kernel_tables": kernel_tables_of(g.id),
                "roofline_rates_of": None if kernel_tables_of(g.id) else rates_donor(g),
                "source": g.source,
                **({"achievable": {"rates_per_s": g.achievable, "source": g.achievable_source}}
                   if g.achievable else {}),
            }
            for g in gpu_catalog().values()
        ]
    }


def levers_json(model: str, batch: int, context: int, rows: Sequence[LeverRow]) -> dict[str, Any]:
    """`kvplan levers --json`: each lever's footprint and its factor against the baseline."""
    return {
        "model": model,
        "batch": batch,
        "context_tokens": context,
        "levers": [asdict(r) for r in rows],
    }


def vllm_version() -> str:
    """The vLLM release whose arithmetic kvplan follows."""
    from kvplan.costs.memory.vllm_defaults import VLLM_VERSION

    return VLLM_VERSION


def plan_json(plan: MemoryPlan) -> dict[str, Any]:
    """`kvplan capacity --json` (less ``ignored_vllm_flags``): one flat object, integer bytes."""
    b, s = plan.budget, plan.settings
    return {
        "model": plan.model,
        "gpu": plan.gpu,
        "fits": True,
        "vllm_version": vllm_version(),
        "requested_bytes": b.requested_bytes,
        "weights_bytes": b.weights_bytes,
        "activation_bytes": b.activation_bytes,
        "non_torch_bytes": b.non_torch_bytes,
        "cudagraph_bytes": b.cudagraph_bytes,
        "available_kv_bytes": b.available_kv_bytes,
        "kv_cache_memory_given": b.kv_cache_memory_given,
        "num_blocks": plan.num_blocks,
        "num_gpu_blocks_override": plan.settings.num_gpu_blocks_override,
        "kv_cache_tokens": plan.kv_cache_tokens,
        "kv_cache_tokens_newer_vllm": plan.kv_cache_tokens_newer_vllm,
        "max_concurrency": plan.max_concurrency,
        "max_model_len": s.max_model_len,
        "block_size": plan.block_size,
        "block_size_log": s.block_size_log or None,
        "quantization_note": s.quantization_note or None,
        "page_size_bytes": plan.page_size_bytes,
        "layers_per_group": plan.layers_per_group,
        "num_padding_layers": plan.num_padding_layers,
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs,
        "tensor_parallel_size": s.tp,
        "pipeline_parallel_size": s.pp,
        "groups": [
            {
                "kind": g.spec.kind,
                "label": g.spec.label,
                "layers": list(g.layer_ids),
                "page_size_bytes": g.page_size_bytes,
                "pages_per_request": g.pages_per_request(s),
            }
            for g in plan.groups
        ],
    }


def cost_json(cost: StepCost) -> dict[str, Any]:
    """A phase's breakdown: flops, bytes and seconds by component, bound, intensity, ridge."""
    return {
        "steps": cost.steps, "tokens": cost.tokens,
        "flops": {**asdict(cost.flops), "total": cost.flops.total},
        "bytes": {**asdict(cost.bytes), "total": cost.bytes.total},
        "seconds": {**asdict(cost.seconds), "total_s": cost.seconds.total_s},
        "bound": cost.bound, "arithmetic_intensity_flop_per_byte": cost.arithmetic_intensity,
        "ridge_point_flop_per_byte": cost.ridge_point,
    }


def latency_json(r: LatencyResult) -> dict[str, Any]:
    """The JSON view of one latency result."""
    return {
        "batch": r.shape.batch, "prompt_tokens": r.shape.prompt_tokens,
        "output_tokens": r.shape.output_tokens,
        "ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "e2e_s": r.e2e_s,
        "output_throughput_tok_s": r.output_throughput_tok_s,
        "prefill_bound": r.prefill_bound, "decode_bound": r.decode_bound,
        "phases": {"prefill": cost_json(r.prefill),
                   "decode": None if r.decode is None else cost_json(r.decode)},
    }


def latency_answer_json(r: LatencyResult, profile: Profile,
                        deployment: Deployment | None = None) -> dict[str, Any]:
    """`kvplan latency --json`: the result, the profile it used and (given the deployment:
    model, GPU id, TP) the error bands (``*_band``, ``band_basis``, ``calibration_notes``)."""
    from kvplan.costs.step.uncertainty import latency_bands

    bands = latency_bands(deployment, r) if deployment is not None else {}
    return {**latency_json(r), **bands, "profile": asdict(profile)}


def sweep_json(lever: str, rows: list[SweepRow],
               deployment: Deployment | None = None) -> dict[str, Any]:
    """`kvplan latency --sweep --json`: rows, where decode turns compute-bound, where KV stops."""
    return {
        "lever": lever,
        "decode_compute_bound_from": sweep_turn(rows),
        "kv_no_longer_fits_at": sweep_no_fit(rows),
        "rows": [sweep_row_json(r, lever, deployment) for r in rows],
    }


def sweep_row_json(r: SweepRow, lever: str = "",
                   deployment: Deployment | None = None) -> dict[str, Any]:
    """One sweep row; a row whose weights do not fit has its reason instead of latencies."""
    from kvplan.costs.step.uncertainty import sweep_row_bands

    head = {"value": r.value, "fits": r.fits, "weights_fit": r.weights_fit,
            "max_batch": r.max_batch}
    if not r.weights_fit:
        return {**head, "does_not_fit": r.does_not_fit}
    bands = {} if deployment is None else sweep_row_bands(deployment, lever, r.value, r.result)
    return {**head, **latency_json(r.result), **bands}


def sweep_turn(rows: list[SweepRow]) -> str | None:
    """The first lever value whose decode is compute-bound."""
    return next((r.value for r in rows if r.weights_fit and r.result.decode_bound == "compute"),
                None)


def sweep_no_fit(rows: list[SweepRow]) -> str | None:
    """The first lever value whose batch's KV cache does not fit."""
    return next((r.value for r in rows if r.weights_fit and not r.fits), None)


def simulate_json(header: dict[str, Any], m: Metrics, r: SimulationResult,
                  deployment: Deployment | None = None) -> dict[str, Any]:
    """`kvplan simulate --json`: the run's settings, vLLM's aggregate keys, kvplan's extras,
    and (given the deployment) the error bands of the latencies and throughput."""
    from kvplan.analysis.metrics import kvplan_extras, vllm_result

    rejected = [{"index": i, "reason": why} for i, why in sorted(r.rejected.items())]
    return {**header, **vllm_result(m), **kvplan_extras(m), "rejected": rejected,
            **simulate_verdicts(r), **simulate_bands(deployment, vllm_result(m))}


def simulate_bands(deployment: Deployment | None, result: dict[str, Any]) -> dict[str, Any]:
    """``*_band`` keys for the mean and median latencies and the output throughput; none
    where the value is vLLM's placeholder 0 of an empty sample: nothing completed, or (TPOT
    and ITL) no completed request had a second token, i.e. output tokens == completed."""
    if deployment is None:
        return {}
    from kvplan.costs.step.uncertainty import SIM_KEYS, deployment_bands

    done = bool(result.get("completed"))  # no request finished: no value for a band to bound
    gaps = done and result.get("total_output_tokens") != result.get("completed")
    values = {k: result.get(k) if (gaps if SIM_KEYS[k] in ("tpot_s", "itl_s") else done)
              else None for k in SIM_KEYS if k in result}
    return deployment_bands(*deployment, values, key_of=SIM_KEYS)


def simulate_verdicts(r: SimulationResult) -> dict[str, Any]:
    """Rejections grouped by reason, and whether the server kept up with the arrivals."""
    from kvplan.analysis.overload import overload

    load = overload(r)
    return {"rejected_by_reason": _by_reason(r.rejected),
            "overload": None if load is None else load.to_json()}


def _by_reason(rejected: dict[int, str]) -> list[dict[str, Any]]:
    if not rejected:  # the usual run: the planner's grouping (analysis.plan) stays unloaded
        return []
    from kvplan.analysis.plan.why.rejections import group_rejections

    return [g.to_json() for g in group_rejections(rejected)]
