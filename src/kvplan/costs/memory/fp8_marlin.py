"""The scales vLLM's fp8 Marlin kernel keeps on GPUs without fp8 tensor cores (Ampere).

On a GPU below compute capability 8.9 (A100, A10G, RTX 3090) vLLM 0.11 serves fp8 weights
weight-only through Marlin (``Fp8LinearMethod`` / ``Fp8MoEMethod`` ``use_marlin``; the
compressed-tensors fp8 schemes through ``CompressedTensorsW8A16Fp8``). After loading,
``marlin_utils_fp8.prepare_fp8_layer_for_marlin`` (``prepare_moe_fp8_layer_for_marlin`` for
the experts) repacks the fp8 values (same bytes) and replaces the checkpoint's float32 scales
with Marlin's group-wise ones, in the layer's 16-bit dtype (``scales.to(layer.orig_dtype)``)::

    per tensor     (1, 1)                          -> (1, N)           repeated per column
    per channel    (N,) float32                    -> (1, N)
    block bn x bk  (ceil(N/bn), ceil(K/bk)) fp32   -> (ceil(K/bk), N)  repeated bn times

N = output rows on one GPU, K = input columns on one GPU. DeepSeek-V3's 128 x 128 blocks so keep
ceil(K/128) x N x 2 bytes a matrix instead of ceil(N/128) x ceil(K/128) x 4: 64x the scale bytes.
Only the difference to the scales priced in ``params`` is computed here.
"""

from __future__ import annotations

from kvplan.costs.memory.params import Part, layer_parts, pp_layer_ranges
from kvplan.costs.memory.weight_formats import FormatArg, WeightFormat, dtype_bytes, given_format
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv


def fp8_marlin(hw: HardwareSpec) -> bool:
    """Whether vLLM 0.11 runs fp8 weights through Marlin on ``hw`` (no fp8 tensor cores:
    Ampere, compute capability 8.0 / 8.6; ROCm never uses Marlin)."""
    return hw.arch.lower().startswith("ampere")


def _marlin_delta(fmt: WeightFormat, rows: int, cols: int, scale_bytes: int) -> int:
    """Marlin's scales minus the priced ones for one (rows x cols) fp8 matrix on one GPU."""
    priced = fmt.linear_bytes(rows, cols) - rows * cols
    k_groups = 1 if fmt.block is None else cdiv(cols, fmt.block[1])
    return k_groups * rows * scale_bytes - priced


def _part_delta(fmt: WeightFormat, p: Part, tp: int, moe_tp: int, experts: int | None,
                scale_bytes: int) -> int:
    """One part's extra bytes (routed experts at ``moe_tp``, ``experts`` of them kept)."""
    routed = p.role == "experts"
    rows, cols = p.shape_on_gpu(moe_tp if routed else tp)
    if not fmt.converts(p.role, p.linear and not p.kept, p.shard, rows):
        return 0
    count = experts if routed and experts is not None else p.count
    return count * _marlin_delta(fmt, rows, cols, scale_bytes)


def fp8_marlin_bytes(model: ModelSpec, hw: HardwareSpec, *, quantization: str | None,
                     dtype: str, tp: int, pp: int, stage: int | None = None,
                     fmt: FormatArg = ..., moe_tp: int | None = None,
                     local_experts: int | None = None) -> int:
    """Bytes fp8 Marlin's scales add (or save) on the fullest GPU, or on pipeline stage
    ``stage``: 0 unless fp8 weights on a GPU without fp8 tensor cores. Routed experts split
    over ``moe_tp`` (default ``tp``), ``local_experts`` of them on a GPU (default all)."""
    fmt = given_format(fmt, quantization, model.quantization, model.weight_block_size,
                       model.quant_layout)
    if fmt is None or fmt.name != "fp8" or not fp8_marlin(hw):
        return 0
    scale_bytes = dtype_bytes(dtype, model.dtype)
    mtp = tp if moe_tp is None else moe_tp

    def stage_bytes(layers: range) -> int:
        return sum(_part_delta(fmt, p, tp, mtp, local_experts, scale_bytes)
                   for i in layers for p in layer_parts(model, i))

    ranges = pp_layer_ranges(model.num_layers, pp)
    if stage is not None:
        return stage_bytes(ranges[stage])
    return max(stage_bytes(r) for r in ranges)
