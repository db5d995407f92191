"""One step's ops under data / expert parallelism: the MoE layers priced as vLLM runs them
over dp x tp GPUs (``kvplan.costs.memory.ep_layout``), plus the dispatch / combine exchange.

Each DP rank runs its own requests through attention (its batch, its KV cache); the MoE
layers see every rank's tokens (the ranks step in lockstep), so a step of T tokens per rank
prices the experts at dp x T tokens over the GPU's local experts (whole experts under EP,
TP-sharded over tp x dp without), times the EP imbalance factor, plus the exchange
(``kvplan.costs.step.parallel.ep_comm``). Priced from the measured kernel tables only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kvplan.costs.memory.ep_layout import DEFAULT_NODE_GPUS, ParallelLayout, parallel_layout
from kvplan.costs.step.ops import StageOps
from kvplan.costs.step.parallel.ep_comm import (
    DEEPEP,
    DEFAULT_A2A_BACKEND,
    DEFAULT_IMBALANCE,
    Link,
    MoeExchange,
)
from kvplan.costs.step.parallel.overlap import dbo_overlap
from kvplan.costs.step.profile import Profile
from kvplan.errors import InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

if TYPE_CHECKING:
    from kvplan.costs.memory.resolved import ResolvedDeployment


def needs_parallel_ops(model: ModelSpec, engine: EngineConfig, hw: HardwareSpec) -> bool:
    """An MoE model under DP or EP, or a TP group wider than one node: the plain TP step
    does not apply (a dense model's DP ranks are plain replicas, each a TP engine)."""
    node = hw.node_gpus or DEFAULT_NODE_GPUS
    moe = model.moe is not None and (engine.data_parallel_size > 1
                                     or engine.enable_expert_parallel)
    return moe or engine.tensor_parallel_size > node


def check_silicon(hw: HardwareSpec, silicon: bool, precision: str = "bfloat16",
                  what: str = "data / expert parallel steps") -> None:
    """DP / EP steps (and TP groups wider than a node) stand on the measured MoE and
    collective tables; refuse the roofline. ``what``: the layout, as the error names it."""
    if not silicon:
        from kvplan.costs import kernels as kn

        if precision == "float32":  # no table holds fp32 GEMMs, whatever the GPU
            raise InputError(f"{what} are priced from measured kernel tables, which hold no "
                             "float32 kernels; use --dtype auto, bfloat16 or float16")
        raise InputError(
            f"{what} are priced from measured kernel tables, which {hw.id} lacks; use one "
            f"of {', '.join(sorted(kn.measured_gpus()))}")


def _layout(model: ModelSpec, engine: EngineConfig, hw: HardwareSpec) -> str:
    """What needs the parallel ops, in words: an MoE's DP / EP, else a TP group spanning
    nodes (``needs_parallel_ops``)."""
    if model.moe is not None and (engine.data_parallel_size > 1 or engine.enable_expert_parallel):
        return "data / expert parallel steps"
    node = hw.node_gpus or DEFAULT_NODE_GPUS
    return (f"steps of a tensor-parallel group wider than one node ({engine.tensor_parallel_size}"
            f" GPUs, {node} per {hw.id} node)")


LATENCY_PROBE_BYTES = 1024
"""The collective latency is the measured NCCL all-to-all of this small a message."""


def link_of(hw: HardwareSpec, profile: Profile) -> Link:
    """The GPU's scale-up and scale-out links (one direction, after the profile's comm
    efficiency) and one collective's latency: the GPU's measured NCCL all-to-all of 1 KiB
    over the node's GPUs (at most 8, the tables' widest)."""
    import numpy as np

    from kvplan.costs import kernels as kn
    from kvplan.costs.step.constants import FALLBACK_LINK_BYTES_PER_S

    node = hw.node_gpus or DEFAULT_NODE_GPUS
    up = hw.interconnect_bytes_per_s / 2 or FALLBACK_LINK_BYTES_PER_S
    probe = kn.nccl(hw.id, "alltoall", np.array([LATENCY_PROBE_BYTES]), min(node, 8))
    return Link(node_gpus=node, scale_up_bytes_per_s=up * profile.comm_eff,
                scale_out_bytes_per_s=hw.scale_out_bytes_per_s * profile.comm_eff,
                latency_s=float(probe.seconds[0]))


def engine_ops(model: ModelSpec, engine: EngineConfig, hw: HardwareSpec, profile: Profile,
               silicon: bool, resolved: ResolvedDeployment | None = None) -> StageOps | None:
    """The step's ops for ``StepCostModel`` (None on the roofline path): the plain TP ops,
    re-laid out when DP, EP or a multi-node TP group is asked for."""
    from kvplan.costs.step.constants import compute_precision
    from kvplan.costs.step.ops import stage_ops

    if engine.enable_dbo and model.moe is None:
        raise InputError("--enable-dbo overlaps the MoE token exchange; this model has no "
                         "experts (drop --enable-dbo)")
    if engine.enable_dbo:
        dbo_overlap(engine, hw)  # vLLM's rules for --enable-dbo, checked for every layout
    if not needs_parallel_ops(model, engine, hw):
        return stage_ops(model, engine, resolved) if silicon else None
    check_silicon(hw, silicon, compute_precision(model, engine), _layout(model, engine, hw))
    imbalance = DEFAULT_IMBALANCE if engine.expert_imbalance is None else engine.expert_imbalance
    return parallel_ops(stage_ops(model, engine, resolved), model, engine, hw, profile,
                        backend=engine.all2all_backend, imbalance=imbalance)


def parallel_ops(ops: StageOps, model: ModelSpec, engine: EngineConfig, hw: HardwareSpec,
                 profile: Profile, *, backend: str = DEFAULT_A2A_BACKEND,
                 imbalance: float = DEFAULT_IMBALANCE) -> StageOps:
    """``ops`` (the plain TP step) with its MoE layers and collectives as DP / EP runs them."""
    e = engine
    layout = parallel_layout(model, e.tensor_parallel_size, e.pipeline_parallel_size,
                             e.data_parallel_size, e.enable_expert_parallel)
    link = link_of(hw, profile)
    out = ops
    if ops.tp > link.node_gpus:
        if link.scale_out_bytes_per_s <= 0:
            raise InputError(f"--tensor-parallel-size {ops.tp} spans nodes of {hw.id}, whose "
                             "inter-node interconnect kvplan does not know")
        out = replace(out, allreduce_link=link)
    if ops.moe is not None:
        factor = imbalance if layout.expert_parallel else 1.0
        out = replace(out, moe=replace(ops.moe, tp=layout.moe_tp, ep=layout.ep,
                                       token_scale=layout.dp, imbalance=factor,
                                       dispatched=backend in DEEPEP))
        if layout.dp > 1:
            out = replace(out, exchange=_exchange(model, engine, layout, ops.moe.count, link,
                                                  backend, factor),
                          overlap=dbo_overlap(engine, hw))
    elif backend != DEFAULT_A2A_BACKEND:
        raise InputError(f"--all2all-backend {backend} applies to MoE models only")
    return out


def _exchange(model: ModelSpec, engine: EngineConfig, layout: ParallelLayout, layers: int,
              link: Link, backend: str, imbalance: float) -> MoeExchange:
    assert model.moe is not None
    return MoeExchange(layers=layers, backend=backend, hidden=model.hidden_size,
                       topk=model.moe.experts_per_token, tp=layout.tp, dp=layout.dp,
                       ep=layout.ep, imbalance=imbalance, link=link,
                       dispatch_token_bytes=_dispatch_token_bytes(model, engine, backend))


FP8_DISPATCH_BLOCK = 128
"""DeepEP's fp8 dispatch: one fp32 scale per 128 values (vLLM's DEEPEP_QUANT_BLOCK_SHAPE)."""


def _dispatch_token_bytes(model: ModelSpec, engine: EngineConfig, backend: str) -> int:
    """vLLM quantizes before a DeepEP dispatch when the experts are block-fp8 (128 x 128):
    fp8 values plus fp32 scales per 128; other models and backends send bf16 (0 here)."""
    from kvplan.costs.step.constants import compute_precision, gemm_dtype

    if backend not in DEEPEP:
        return 0
    if gemm_dtype(model, engine, compute_precision(model, engine)) != "fp8_block":
        return 0
    h = model.hidden_size
    return h + -(-h // FP8_DISPATCH_BLOCK) * 4
