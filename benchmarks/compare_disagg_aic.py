"""aiconfigurator's estimate of the held-out disagg / EP points' questions (optional peer).

Used by ``compare_disagg_public.py --aiconfigurator``. A phase measured alone is asked as
aiconfigurator's static modes (``cli_estimate(mode="static_ctx" | "static_gen")``) with the
point's attention-DP and MoE-EP sizes on its SGLang tables; ``batch_size`` is per attention-DP
rank there. A served xPyD run at a request rate is not asked: aiconfigurator has no request
queue (its disagg mode prices a given batch per worker, not an arrival process).

    .venv/bin/pip install aiconfigurator         # optional, never a kvplan dependency
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NODE_GPUS = 8
SYSTEMS = {"H100-SXM-80GB": "h100_sxm", "H200-SXM-141GB": "h200_sxm", "A100-80GB-SXM": "a100_sxm"}
BACKENDS = {"SGLang": "sglang", "vLLM": "vllm"}


def _kwargs(p: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(metric, cli_estimate keywords) for a phase point; ValueError with the reason otherwise."""
    w, mode = p["workload"], p["workload"]["mode"]
    if mode not in ("prefill_phase", "decode_phase"):
        raise ValueError(f"workload {mode!r}: aiconfigurator has no request queue to replay it")
    phase = "prefill" if mode == "prefill_phase" else "decode"
    par = p["parallelism"][phase]
    kw: dict[str, Any] = {"backend_name": BACKENDS[p["engine"]], "tp_size": par["tp"],
                          "attention_dp_size": par["dp"], "moe_ep_size": par["ep"],
                          "moe_tp_size": 1}
    if phase == "prefill":
        kw |= {"mode": "static_ctx", "isl": w["input_len"], "osl": 1,
               "batch_size": w["tokens_per_gpu"] // w["input_len"]}
        return "prefill_throughput_tok_s_per_node", kw
    kw |= {"mode": "static_gen", "isl": w["kv_len"], "osl": 2,
           "batch_size": w["requests_per_gpu"]}
    return "output_throughput_tok_s_per_node", kw


def _per_node(metric: str, kw: Mapping[str, Any], result: Any) -> float:
    if metric == "prefill_throughput_tok_s_per_node":
        return NODE_GPUS * kw["batch_size"] * kw["isl"] / (float(result.ttft) / 1e3)
    return NODE_GPUS * kw["batch_size"] / (float(result.tpot) / 1e3)


def _estimate(p: Mapping[str, Any]) -> tuple[str, float]:
    import logging

    from aiconfigurator.cli.api import cli_estimate

    metric, kw = _kwargs(p)
    system = SYSTEMS.get(p["gpu"])
    if system is None:
        raise ValueError(f"GPU {p['gpu']} has no aiconfigurator system here")
    logging.disable(logging.CRITICAL)  # its per-table loading notes
    try:
        result = cli_estimate(p["model_config"], system, **kw)
    finally:
        logging.disable(logging.NOTSET)
    return metric, _per_node(metric, kw, result)


def aic_estimates(points: Sequence[Mapping[str, Any]],
                  ) -> tuple[dict[tuple[str, str], float], list[str]]:
    """{(point, metric): aiconfigurator's value} and one line per point it could not price."""
    try:
        from importlib import metadata

        version = metadata.version("aiconfigurator")
    except metadata.PackageNotFoundError:
        return {}, ["not installed ('.venv/bin/pip install aiconfigurator'; optional)"]
    values: dict[tuple[str, str], float] = {}
    notes = [f"version {version}"]
    for p in points:
        try:
            metric, value = _estimate(p)
        except Exception as exc:  # its own errors name what it lacks; report, go on
            notes.append(f"{p['id']}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
            continue
        values[(p["id"], metric)] = value
        if p.get("expert_balance") == "perfect":
            notes.append(f"{p['id']}: no expert-balance input; priced as its default routing")
    return values, notes
