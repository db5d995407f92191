"""Weight bytes per GPU under data and expert parallelism (``kvplan.costs.memory.ep_layout``),
with vLLM's mxfp4 expert padding for the experts each GPU holds."""

from __future__ import annotations

from kvplan.costs.memory.ep_layout import ParallelLayout, parallel_layout, parallel_weight_bytes
from kvplan.costs.memory.mxfp4_layout import mxfp4_padding_bytes
from kvplan.costs.memory.settings import Settings
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
