"""Weight bytes per GPU under data and expert parallelism (``kvplan.costs.memory.ep_layout``),
with vLLM's mxfp4 expert padding for the experts each GPU holds."""

from __future__ import annotations

from kvplan.costs.memory.ep_layout import ParallelLayout, parallel_layout, parallel_weight_bytes
from kvplan.costs.memory.fp8_marlin import fp8_marlin_bytes
from kvplan.costs.memory.gptq_kernels import gptq_expert_bytes
from kvplan.costs.memory.mxfp4_layout import mxfp4_padding_bytes
from kvplan.costs.memory.settings import Settings
from kvplan.costs.memory.weight_formats import FormatArg
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec


def layout_of(model: ModelSpec, s: Settings) -> ParallelLayout:
    """The parallel layout these settings give ``model``."""
    return parallel_layout(model, s.tp, s.pp, s.dp, s.expert_parallel)


def parallel_weights(model: ModelSpec, hw: HardwareSpec, s: Settings,
                     stage: int | None = None) -> int:
    """Weights (+ mxfp4 padding of the local experts) on the fullest GPU or on ``stage``."""
    layout = layout_of(model, s)
    w = parallel_weight_bytes(model, layout, dtype=s.dtype, quantization=s.quantization,
                              stage=stage)
    return w + expert_padding_bytes(model, hw, s, layout, stage)


def expert_padding_bytes(model: ModelSpec, hw: HardwareSpec, s: Settings,
                         layout: ParallelLayout, stage: int | None = None) -> int:
    """mxfp4_padding_bytes pads every one of E experts at the experts' TP degree; a GPU
    holding ``local_experts`` of them pads only those (the same bytes per expert)."""
    every = mxfp4_padding_bytes(model, hw, quantization=s.quantization, tp=layout.moe_tp,
                                pp=s.pp, stage=stage, backend=s.mxfp4_moe_backend)
    if not every or not layout.num_experts:
        return every
    return every // layout.num_experts * layout.local_experts


def expert_kernel_bytes(model: ModelSpec, hw: HardwareSpec, s: Settings,
                        stage: int | None = None) -> int:
    """What a GPTQ / AWQ MoE's expert kernel keeps beyond the priced weights
    (``gptq_expert_bytes``), for the experts each GPU holds at the experts' TP degree."""
    if model.moe is None or model.quant_layout is None:
        return 0
    moe_tp, local = s.tp, model.moe.num_experts
    if s.dp > 1 or s.expert_parallel:
        layout = layout_of(model, s)
        moe_tp, local = layout.moe_tp, layout.local_experts
    return gptq_expert_bytes(model, hw, quantization=s.quantization, dtype=s.dtype,
                             moe_tp=moe_tp, local_experts=local, pp=s.pp, stage=stage)


def fp8_marlin_scale_bytes(model: ModelSpec, hw: HardwareSpec, s: Settings,
                           stage: int | None = None, fmt: FormatArg = ...) -> int:
    """What fp8 Marlin's 16-bit group scales add on a GPU without fp8 tensor cores
    (``fp8_marlin_bytes``), for the experts each GPU holds at the experts' TP degree."""
    moe_tp, local = s.tp, None
    if model.moe is not None and (s.dp > 1 or s.expert_parallel):
        layout = layout_of(model, s)
        moe_tp, local = layout.moe_tp, layout.local_experts
    return fp8_marlin_bytes(model, hw, quantization=s.quantization, dtype=s.dtype, tp=s.tp,
                            pp=s.pp, stage=stage, fmt=fmt, moe_tp=moe_tp, local_experts=local)
