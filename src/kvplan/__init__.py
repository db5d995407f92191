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

Every name loads on first use, so `import kvplan` (and each CLI command) stays light. In
Jupyter / IPython each answer above displays as the CLI prints it
(``kvplan.report.views.notebook``).
"""

from typing import TYPE_CHECKING, Any

from kvplan.errors import ConfigError, DoesNotFitError, InputError, KvplanError

if TYPE_CHECKING:  # the lazy names below, for type checkers (X as X: re-exported)
    from kvplan.analysis.footprint import batch_footprint as batch_footprint
    from kvplan.analysis.footprint import lever_table as lever_table
    from kvplan.analysis.metrics import compute_metrics as compute_metrics
    from kvplan.analysis.plan.bands import PlanBands as PlanBands
    from kvplan.analysis.plan.bands import SloCheck as SloCheck
    from kvplan.analysis.plan.planner import PlanOptions as PlanOptions
    from kvplan.analysis.plan.planner import plan as plan
    from kvplan.analysis.plan.records import Plan as Plan
    from kvplan.analysis.serving import simulate_deployment as simulate_deployment
    from kvplan.analysis.serving import simulate_serving as simulate_serving
    from kvplan.analysis.timeline import request_timeline as request_timeline
    from kvplan.costs.memory.plan import plan_deployment as plan_deployment
    from kvplan.costs.memory.plan import plan_memory as plan_memory
    from kvplan.costs.step.latency import RequestShape as RequestShape
    from kvplan.costs.step.latency import request_latency as request_latency
    from kvplan.costs.step.roofline import Profile as Profile
    from kvplan.costs.step.roofline import StepCostModel as StepCostModel
    from kvplan.specs.catalog import load_model as load_model
    from kvplan.specs.deployment import Deployment as Deployment
    from kvplan.specs.hardware import load_gpu as load_gpu
    from kvplan.specs.kv import kv_spec as kv_spec
    from kvplan.specs.kv import resolve_precision as resolve_precision
    from kvplan.specs.prices import price_table as price_table
    from kvplan.specs.requests.workload import WorkloadArgs as WorkloadArgs
    from kvplan.specs.requests.workload import build_workload as build_workload
    from kvplan.specs.serving import EngineConfig as EngineConfig
    from kvplan.specs.slo import Slo as Slo
    from kvplan.specs.slo import parse_goodput_slo as parse_goodput_slo
    from kvplan.specs.slo import parse_slo as parse_slo

__all__ = ["ConfigError", "DoesNotFitError", "InputError", "KvplanError"]  # + _LAZY's names
__version__ = "0.1.0"

_LAZY = {
    "batch_footprint": "kvplan.analysis.footprint",
    "lever_table": "kvplan.analysis.footprint",
    "request_timeline": "kvplan.analysis.timeline",
    "load_model": "kvplan.specs.catalog",
    "load_gpu": "kvplan.specs.hardware",
    "kv_spec": "kvplan.specs.kv",
    "resolve_precision": "kvplan.specs.kv",
    "EngineConfig": "kvplan.specs.serving",
    "plan_memory": "kvplan.costs.memory.plan",
    "StepCostModel": "kvplan.costs.step.roofline",
    "Profile": "kvplan.costs.step.roofline",
    "RequestShape": "kvplan.costs.step.latency",
    "request_latency": "kvplan.costs.step.latency",
    "WorkloadArgs": "kvplan.specs.requests.workload",
    "build_workload": "kvplan.specs.requests.workload",
    "simulate_serving": "kvplan.analysis.serving",
    "compute_metrics": "kvplan.analysis.metrics",
    "plan": "kvplan.analysis.plan.planner",
    "plan_deployment": "kvplan.costs.memory.plan",
    "simulate_deployment": "kvplan.analysis.serving",
    "PlanOptions": "kvplan.analysis.plan.planner",
    "Plan": "kvplan.analysis.plan.records",
    "PlanBands": "kvplan.analysis.plan.bands",
    "SloCheck": "kvplan.analysis.plan.bands",
    "Deployment": "kvplan.specs.deployment",
    "Slo": "kvplan.specs.slo",
    "parse_slo": "kvplan.specs.slo",
    "parse_goodput_slo": "kvplan.specs.slo",
    "price_table": "kvplan.specs.prices",
}
__all__ += list(_LAZY)


def __getattr__(name: str) -> Any:
    """Import every API name on first use, so ``import kvplan`` (and the CLI) stays light;
    a function comes wrapped in its argument type checks (``kvplan.api_check``)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    import importlib
    import inspect

    value = getattr(importlib.import_module(_LAZY[name]), name)
    if inspect.isfunction(value):
        from kvplan.api_check import checked

        value = checked(value, name)
    globals()[name] = value  # later look-ups find it without calling __getattr__
    return value


def __dir__() -> list[str]:
    """The module's names and the lazy API ones (PEP 562), so ``kvplan.<Tab>`` offers them
    before first use; nothing is imported."""
    return sorted(set(globals()) | set(_LAZY))


def _show_in_notebooks() -> None:
    """In IPython / Jupyter, answers display as the CLI's tables (``kvplan.report.views.notebook``);
    elsewhere nothing is imported."""
    import sys

    if "IPython" in sys.modules:
        from kvplan.report.views.notebook import enable

        enable()


_show_in_notebooks()
