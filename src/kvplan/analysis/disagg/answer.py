"""`kvplan simulate --disagg xPyD` as one answer: the xPyD form, the fleet from per-role GPU
and engine, the run with the client's and the fleet's metrics, and the JSON document.

The command line and the web page both call these (docs/disaggregation.md), so a fleet
given either way is the same fleet and its document has the same keys.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.analysis.disagg.metrics import DisaggMetrics
    from kvplan.analysis.disagg.serving import DisaggRun
    from kvplan.analysis.metrics import Metrics
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.hardware import HardwareSpec
    from kvplan.specs.model import ModelSpec
    from kvplan.specs.requests.workload import Workload, WorkloadArgs
    from kvplan.specs.serving import EngineConfig

DISAGG_FIELDS = ("disagg", "prefill_gpu", "decode_gpu", "prefill_tp", "decode_tp",
                 "prefill_instances", "decode_instances", "kv_link", "prefill_dp", "decode_dp")
"""The flags that make a simulation disaggregated (any one of them)."""
DEFAULT_LINK = "ib-ndr"
_XPYD = re.compile(r"(\d{1,4})P(\d{1,4})D", re.IGNORECASE)


def disagg_given(given: dict[str, Any]) -> bool:
    """Whether any disaggregation flag was given (then the fleet is disaggregated);
    --router alone is refused (one simulated server has no router)."""
    if any(given.get(k) is not None for k in DISAGG_FIELDS):
        return True
    if given.get("router") is not None:
        raise InputError("--router routes a disaggregated fleet's proxy; give --disagg xPyD "
                         "(one server has no router; fleets of replicas: kvplan plan)")
    return False


def xpyd_counts(text: str | None, x: int | None = None, y: int | None = None
                ) -> tuple[int, int]:
    """(x, y) from --disagg xPyD and/or --prefill-instances / --decode-instances (default 1)."""
    if text is not None:
        m = _XPYD.fullmatch(text.strip())
        if m is None:
            raise InputError(f"--disagg {text!r}: write xPyD, e.g. 1P1D or 2P4D")
        px, py = int(m.group(1)), int(m.group(2))
        for flag, given_n, n in (("--prefill-instances", x, px), ("--decode-instances", y, py)):
            if given_n is not None and given_n != n:
                raise InputError(f"--disagg {text} says {n} but {flag} {given_n}; give one")
        x, y = px, py
    x, y = (1 if x is None else x), (1 if y is None else y)
    for role, n in (("prefill", x), ("decode", y)):
        if n < 1:
            said = f"--disagg {text.strip()}: " if text is not None else ""
            raise InputError(f"{said}--{role}-instances must be at least 1, got {n}")
    return x, y


def role_gpu(load: Any, name: str, role: str) -> HardwareSpec:
    """--prefill-gpu / --decode-gpu NAME through ``load`` (the CLI's load_gpu, the web's
    resolve_gpu); a refusal leads with its flag (the web page shows it by that field)."""
    from kvplan.errors import KvplanError, located

    try:
        gpu: HardwareSpec = load(name)
    except KvplanError as exc:
        raise InputError(located(f"--{role}-gpu", exc)) from None
    return gpu


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """One role's GPU, engine flags (its TP included) and instance count."""

    gpu: HardwareSpec
    engine: EngineConfig
    instances: int


def fleet(spec: ModelSpec, prefill: Pool, decode: Pool, link: str | None = None,
          router: str | None = None) -> DisaggDeployment:
    """The DisaggDeployment of two pools joined by catalog link ``link`` (default ib-ndr)."""
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.links import load_link

    pools = [Deployment(model=spec, gpu=p.gpu, engine=p.engine, replicas=p.instances)
             for p in (prefill, decode)]
    return DisaggDeployment(prefill=pools[0], decode=pools[1],
                            link=load_link(link or DEFAULT_LINK), router=router or "round-robin")


def measure(dd: DisaggDeployment, work: Workload | WorkloadArgs, *,
            percentile_metrics: Sequence[str], percentiles: Sequence[float],
            goodput_ms: dict[str, float], profile: str | None = None
            ) -> tuple[DisaggRun, Metrics, DisaggMetrics]:
    """Simulate ``dd`` (the link checked against a TTFT goodput bound), then the client's
    `vllm bench serve` metrics (peak concurrency: requests in flight) and the fleet's."""
    from kvplan.analysis import metrics as mx
    from kvplan.analysis.disagg.metrics import disagg_metrics
    from kvplan.analysis.disagg.serving import simulate_disagg_serving

    run = simulate_disagg_serving(dd, work, profile=profile, ttft_slo_ms=goodput_ms.get("ttft"))
    m = mx.compute_metrics(run.result.client, percentile_metrics=percentile_metrics,
                           percentiles=percentiles, goodput_ms=goodput_ms or None)
    return run, m, disagg_metrics(run.result, percentiles)


def disagg_doc(run: DisaggRun, m: Metrics, dm: DisaggMetrics,
               wargs: WorkloadArgs | None) -> dict[str, Any]:
    """`vllm bench serve`'s keys for the client's view, then the fleet's added keys."""
    from kvplan.analysis.disagg.metrics import disagg_json, pool_kv_series
    from kvplan.analysis.metrics import kvplan_extras, rejected_list, vllm_result

    extras = kvplan_extras(m)
    for k in ("peak_kv_blocks", "num_blocks", "peak_kv_usage", "num_steps"):
        extras.pop(k)  # one server's figures; the pools' own are below
    return {**run.header(wargs), **vllm_result(m), **extras, **disagg_json(dm),
            "rejected": rejected_list(run.result.client),
            "kv_usage_by_pool": pool_kv_series(run.result)}
