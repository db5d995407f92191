"""The silicon layer: measured op latencies per GPU, engine and engine version.

Tables derived from NVIDIA's aiconfigurator-core (Apache-2.0) by scripts/derive_silicon.py;
lookups interpolate monotonically in log space and extrapolate by the roofline past the
measured range, and every answer says which table it stands on (docs/silicon.md)."""

from kvplan.costs.kernels.attention import (
    context_attention,
    context_attention_s,
    decode_attention,
    decode_attention_s,
)
from kvplan.costs.kernels.comm import NCCL_OPS, all_gather, all_reduce, all_reduce_s, nccl
from kvplan.costs.kernels.donor import Efficiency, nearest_measured_gpu
from kvplan.costs.kernels.gemm import GEMM_DTYPES, gemm, gemm_s
from kvplan.costs.kernels.mla import (
    mla_context,
    mla_context_s,
    mla_decode,
    mla_decode_s,
    mla_donor,
)
from kvplan.costs.kernels.moe import MOE_DTYPES, moe, moe_s
from kvplan.costs.kernels.result import OpTime, Status, TableSource
from kvplan.costs.kernels.tables import manifest, measured_gpus, resolve_gpu

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
    "all_reduce_s",
    "context_attention",
    "context_attention_s",
    "decode_attention",
    "decode_attention_s",
    "gemm",
    "gemm_s",
    "manifest",
    "measured_gpus",
    "mla_context",
    "mla_context_s",
    "mla_decode",
    "mla_decode_s",
    "mla_donor",
    "moe",
    "moe_s",
    "nccl",
    "nearest_measured_gpu",
    "resolve_gpu",
]
