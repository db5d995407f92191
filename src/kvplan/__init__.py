"""kvplan: how much GPU memory the KV cache takes, when it is claimed, what fits, how fast.

Python API (mirrors the CLI)::

    import kvplan
    model = kvplan.load_model("meta-llama/Llama-2-70b-hf")      # or a path to a config.json
    kv = kvplan.kv_spec(model, kv_cache_dtype="fp8", tensor_parallel_size=1)
    kv.bytes_per_token                                            # 163840
    tl = kvplan.request_timeline(kv, 2048, 128)                   # prefill jump + decode trickle
    tl.prefill_share                                              # 0.941...
    kvplan.batch_footprint(kv, 64, 4096).total_bytes              # 42949672960 (40 GiB)

    gpu = kvplan.load_gpu("H100")
    plan = kvplan.plan_memory(model, gpu, kvplan.EngineConfig(tensor_parallel_size=4))
    plan.num_blocks, plan.kv_cache_tokens, plan.max_concurrency
    lat = kvplan.request_latency(model, gpu, kvplan.EngineConfig(tensor_parallel_size=4),
                                 kvplan.RequestShape(batch=8, prompt_tokens=2048,
                                                     output_tokens=128))
    run = kvplan.simulate_serving("meta-llama/Llama-3.1-8B", "H100",
                                  workload=kvplan.WorkloadArgs(dataset="azure-conv"))
    kvplan.compute_metrics(run.result).output_throughput

    slo = kvplan.Slo(bounds=kvplan.parse_slo(["ttft:p99:2000 tpot:p99:100"]))
    best = kvplan.plan("meta-llama/Llama-3.1-8B", kvplan.WorkloadArgs(dataset="azure-conv"),
                       slo, gpus=["H100", "L40S"], kv_cache_dtypes=["auto", "fp8"])
    best.winner.deployment, best.winner.usd_per_hour, best.serve_command

Capacity, latency and simulation names load on first use, so `import kvplan` stays light.
"""

from typing import Any

from kvplan.analysis.footprint import batch_footprint, lever_table
from kvplan.analysis.timeline import request_timeline
from kvplan.errors import ConfigError, DoesNotFitError, InputError, KvplanError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.kv import kv_spec, resolve_precision

__all__ = [
    "ConfigError",
    "DoesNotFitError",
    "InputError",
    "KvplanError",
    "batch_footprint",
    "kv_spec",
    "lever_table",
    "load_gpu",
    "load_model",
    "request_timeline",
    "resolve_precision",
]
__version__ = "0.1.0"

_LAZY = {
    "EngineConfig": "kvplan.specs.serving",
    "plan_memory": "kvplan.costs.memory",
    "StepCostModel": "kvplan.costs.roofline",
    "Profile": "kvplan.costs.roofline",
    "RequestShape": "kvplan.costs.latency",
    "request_latency": "kvplan.costs.latency",
    "WorkloadArgs": "kvplan.specs.workload",
    "build_workload": "kvplan.specs.workload",
    "simulate_serving": "kvplan.analysis.serving",
    "compute_metrics": "kvplan.analysis.metrics",
    "plan": "kvplan.analysis.planner",
    "plan_deployment": "kvplan.costs.memory",
    "simulate_deployment": "kvplan.analysis.serving",
    "PlanOptions": "kvplan.analysis.planner",
    "Plan": "kvplan.analysis.plan_types",
    "PlanBands": "kvplan.analysis.plan_bands",
    "SloCheck": "kvplan.analysis.plan_bands",
    "Deployment": "kvplan.specs.deployment",
    "Slo": "kvplan.specs.slo",
    "parse_slo": "kvplan.specs.slo",
    "parse_goodput_slo": "kvplan.specs.slo",
    "price_table": "kvplan.specs.prices",
}
__all__ += list(_LAZY)


def __getattr__(name: str) -> Any:
    """Import capacity/latency/simulation names on first use (they pull in numpy, pydantic)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
