"""How vLLM lays an engine out over dp x tp x pp GPUs: expert and data parallelism, per GPU.

vLLM 0.11 (``fused_moe/config.py`` FusedMoEParallelConfig.make, ``fused_moe/layer.py``
determine_expert_map); every DP rank is its own engine of tp x pp GPUs::

    attention, dense MLP, shared experts, embedding   TP-sharded over tp, copied on each DP rank
    routed experts, no EP   TP-sharded over tp x dp ("flatten_tp_across_dp"): moe_tp = tp x dp
    routed experts, EP      whole experts over ep = tp x dp GPUs: rank r holds E // ep experts,
                            one more when r < E % ep (uneven splits allowed), moe_tp = 1

With dp = 1 and EP off this is the plain TP layout (``kvplan.costs.memory.params``), byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.costs.memory.params import Part, _pricing, _stage_parts
from kvplan.errors import InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv

DEFAULT_NODE_GPUS = 8
"""GPUs per node where the GPU description gives none (an HGX/DGX-style 8-GPU server)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelLayout:
    """One ``vllm serve``'s parallel layout: dp engines of tp x pp GPUs, MoE split."""

    tp: int
    pp: int
    dp: int
    expert_parallel: bool
    """EP in effect: --enable-expert-parallel on an MoE model with dp x tp > 1."""
    moe_tp: int
    """Tensor-parallel degree of each routed expert (tp x dp without EP, 1 with EP)."""
    ep: int
    """Expert-parallel degree (1 without EP, tp x dp with)."""
    num_experts: int
    local_experts: int
    """Routed experts per MoE layer on the fullest GPU: ceil(E / ep)."""

    @property
    def gpus_per_rank(self) -> int:
        """GPUs of one DP rank (one engine): tp x pp."""
        return self.tp * self.pp

    @property
    def total_gpus(self) -> int:
        """GPUs of the whole deployment: tp x pp x dp."""
        return self.gpus_per_rank * self.dp

    @property
    def is_plain_tp(self) -> bool:
        """dp = 1 and no EP: kvplan's TP arithmetic applies unchanged."""
        return self.dp == 1 and not self.expert_parallel

    @property
    def uneven_experts(self) -> bool:
        """E % ep != 0: the first E % ep ranks hold one expert more (vLLM allows it)."""
        return self.expert_parallel and self.num_experts % self.ep != 0


def parallel_layout(model: ModelSpec, tp: int, pp: int, dp: int,
                    enable_expert_parallel: bool) -> ParallelLayout:
    """The layout vLLM builds; InputError for what it cannot run."""
    moe = model.moe
    experts = 0 if moe is None else moe.num_experts
    ep_on = moe is not None and enable_expert_parallel and tp * dp > 1
    ep = tp * dp if ep_on else 1
    moe_tp = 1 if ep_on else tp * dp
    if moe is not None and ep > experts:
        raise InputError(
            f"expert parallelism over {ep} GPUs (tp {tp} x dp {dp}) exceeds the "
            f"{experts} experts of {model.name}: some GPUs would hold none; use at most "
            f"{experts} GPUs (e.g. --data-parallel-size {max(1, experts // tp)})")
    if moe is not None and not ep_on and moe.moe_intermediate_size % moe_tp:
        raise InputError(
            f"without --enable-expert-parallel vLLM shards each expert over tp x dp = "
            f"{moe_tp} GPUs, which must divide moe_intermediate_size "
            f"{moe.moe_intermediate_size}; add --enable-expert-parallel or lower -dp")
    return ParallelLayout(tp=tp, pp=pp, dp=dp, expert_parallel=ep_on, moe_tp=moe_tp, ep=ep,
                          num_experts=experts, local_experts=cdiv(experts, ep) if experts else 0)


def check_fits_nodes(layout: ParallelLayout, hw: HardwareSpec) -> None:
    """A deployment wider than one node needs the node's inter-node link in the catalog."""
    node = hw.node_gpus or DEFAULT_NODE_GPUS
    if layout.total_gpus <= node or hw.scale_out_bytes_per_s > 0:
        return
    fit = max(1, node // layout.gpus_per_rank)
    raise InputError(
        f"dp {layout.dp} x tp {layout.tp} x pp {layout.pp} = {layout.total_gpus} GPUs spans "
        f"more than one {node}-GPU node of {hw.id}, whose inter-node interconnect kvplan "
        f"does not know (give scale_out_gbps in a GPU file); within one node: "
        f"--data-parallel-size {fit} at --tensor-parallel-size {layout.tp}")


def _gpu_bytes(model: ModelSpec, layout: ParallelLayout, dtype: str, quantization: str | None,
               stage: int | None, experts_only: bool) -> int:
    """The fullest stage's (or ``stage``'s) bytes on one GPU: routed experts at ``moe_tp``
    and ``local_experts`` copies, every other part TP-sharded over ``tp``."""
    pricing = _pricing(model, dtype, quantization)

    def part_bytes(part: Part) -> int:
        if part.role != "experts":
            return 0 if experts_only else pricing.bytes_of(part, layout.tp)
        return pricing.bytes_of(replace(part, count=layout.local_experts), layout.moe_tp)

    stages = range(layout.pp) if stage is None else (stage,)
    return max(sum(map(part_bytes, _stage_parts(model, layout.pp, s))) for s in stages)


def parallel_weight_bytes(model: ModelSpec, layout: ParallelLayout, *, dtype: str = "auto",
                          quantization: str | None = None, stage: int | None = None) -> int:
    """Weight bytes on the fullest GPU (or on pipeline stage ``stage``) under ``layout``."""
    return _gpu_bytes(model, layout, dtype, quantization, stage, False)


def expert_weight_bytes(model: ModelSpec, layout: ParallelLayout, *, dtype: str = "auto",
                        quantization: str | None = None, stage: int | None = None) -> int:
    """Of those, the routed experts' bytes (the part EP divides)."""
    return _gpu_bytes(model, layout, dtype, quantization, stage, True)
