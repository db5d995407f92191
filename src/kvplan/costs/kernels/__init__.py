"""The silicon layer: measured op latencies per GPU, engine and engine version.

Tables derived from NVIDIA's aiconfigurator-core (Apache-2.0) by scripts/derive_silicon.py;
lookups interpolate monotonically in log space and extrapolate by the roofline past the
measured range, and every answer says which table it stands on (docs/silicon.md)."""

from typing import TYPE_CHECKING, Any

from kvplan.costs.kernels.attention import (
    context_attention,
    context_attention_s,
    decode_attention,
    decode_attention_s,
)
from kvplan.costs.kernels.comm import (
    NCCL_OPS,
    all_gather,
    all_reduce,
    all_reduce_line,
    all_reduce_s,
    link_scale,
    logits_gather_s,
    nccl,
)
from kvplan.costs.kernels.gemm import GEMM_DTYPES, gemm, gemm_s
from kvplan.costs.kernels.moe import (  # eager: `moe` names the module too
    MOE_DTYPES,
    moe,
    moe_routing,
    moe_s,
    served_moe_s,
)
from kvplan.costs.kernels.result import OpTime, Status, TableSource
from kvplan.costs.kernels.slices import kv_table
from kvplan.costs.kernels.tables import (
    capped_at,
    has_tables,
    manifest,
    measured_gpus,
    resolve_gpu,
)

if TYPE_CHECKING:  # the lazy names below (X as X: re-exported)
    from kvplan.costs.kernels.donor import Efficiency as Efficiency
    from kvplan.costs.kernels.donor import dominated_by as dominated_by
    from kvplan.costs.kernels.donor import dominating as dominating
    from kvplan.costs.kernels.donor import nearest_measured_gpu as nearest_measured_gpu
    from kvplan.costs.kernels.mla import mla_context as mla_context
    from kvplan.costs.kernels.mla import mla_context_s as mla_context_s
    from kvplan.costs.kernels.mla import mla_decode as mla_decode
    from kvplan.costs.kernels.mla import mla_decode_s as mla_decode_s
    from kvplan.costs.kernels.mla import mla_donor as mla_donor

_LAZY = {"Efficiency": "donor", "nearest_measured_gpu": "donor", "dominated_by": "donor",
         "dominating": "donor",
         "mla_context": "mla",
         "mla_context_s": "mla", "mla_decode": "mla", "mla_decode_s": "mla",
         "mla_donor": "mla"}
"""Names loaded on first use: a dense model on a measured GPU never needs the MLA or donor
lookups (two modules a plain ``kvplan simulate`` no longer imports). ``moe`` stays eager:
importing the submodule ``kernels.moe`` would otherwise leave the package's ``moe`` naming
the module, not the function."""


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


__all__ = [
    "GEMM_DTYPES",
    "MOE_DTYPES",
    "NCCL_OPS",
    "Efficiency",
    "OpTime",
    "Status",
    "TableSource",
    "all_gather",
    "all_reduce",
    "all_reduce_line",
    "all_reduce_s",
    "capped_at",
    "context_attention",
    "context_attention_s",
    "decode_attention",
    "decode_attention_s",
    "dominated_by",
    "dominating",
    "gemm",
    "gemm_s",
    "has_tables",
    "kv_table",
    "link_scale",
    "logits_gather_s",
    "manifest",
    "measured_gpus",
    "mla_context",
    "mla_context_s",
    "mla_decode",
    "mla_decode_s",
    "mla_donor",
    "moe",
    "moe_routing",
    "moe_s",
    "nccl",
    "nearest_measured_gpu",
    "resolve_gpu",
    "served_moe_s",
]
