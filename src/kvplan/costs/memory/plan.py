"""vLLM v1 (0.11) memory budget and KV block arithmetic -> MemoryPlan.

Budget on one GPU (gpu_worker.determine_available_memory)::

    requested = cuda_total x gpu_memory_utilization
    available_kv = requested - weights - peak_activation - non_torch     (CUDA graphs are
                                                                          captured afterwards)
Blocks (kv_cache_utils.get_kv_cache_config): layers grouped so every group has the same
number of layers (padding layers where needed); one block = one page in every layer of a group::

    num_blocks = available_kv // page_size // layers_per_group

Hybrid attention + state models first get one page size for all layers
(HybridAttentionMambaModelConfig): the attention block grows until its page holds a state,
and the state page is padded up to the attention page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from kvplan.costs.memory import vllm_defaults as vd
from kvplan.costs.memory.activation import (
    activation_bytes,
    cudagraph_bytes,
    non_torch_bytes,
    rope_cache_bytes,
)
from kvplan.costs.memory.ep_memory import (
    expert_kernel_bytes,
    fp8_marlin_scale_bytes,
    parallel_weights,
)
from kvplan.costs.memory.gptq_kernels import gptq_kernel_bytes
from kvplan.costs.memory.kv_groups import (
    Group,
    HybridBlock,
    build_groups,
    hybrid_block,
    layer_specs,
    needed_bytes,
    none_fits,
    stage_groups,
)
from kvplan.costs.memory.mla_absorb import mla_absorbed_bytes
from kvplan.costs.memory.mxfp4_layout import mxfp4_padding_bytes
from kvplan.costs.memory.params import pp_layer_ranges, stage_weight_bytes, weight_bytes_per_gpu
from kvplan.costs.memory.resolved import ResolvedDeployment, resolve, resolve_deployment
from kvplan.costs.memory.settings import Settings, resolve_settings
from kvplan.costs.memory.vision import vision_bytes
from kvplan.costs.memory.weight_formats import FormatArg
from kvplan.errors import DoesNotFitError, InputError, KvTooSmallError
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import LayerCacheSpec, ModelKv, StateSpec, model_precision
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import fmt_bytes

__all__ = [
    "Budget",
    "Group",
    "HybridBlock",
    "MemoryPlan",
    "Settings",
    "budget",
    "build_groups",
    "hybrid_block",
    "largest_max_model_len",
    "layer_specs",
    "needed_bytes",
    "plan_deployment",
    "plan_memory",
    "resolve_settings",
]

# ---------------------------------------------------------------- budget


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Where one GPU's memory goes, as vLLM 0.11's profiler accounts for it."""

    cuda_total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    """Estimated; vLLM 0.11 captures graphs after sizing the KV cache, so not subtracted."""
    available_kv_bytes: int
    kv_cache_memory_given: bool


def budget(model: ModelSpec, hw: HardwareSpec, s: Settings, stage: int | None = None,
           fmt: FormatArg = ...) -> Budget:
    """The per-GPU memory budget of pipeline stage ``stage`` (None: the fullest stage, priced
    with the sampler); ``kv_cache_memory_bytes`` replaces the estimate exactly."""
    total = vd.cuda_total_bytes(hw)
    requested = int(total * s.gpu_memory_utilization)
    weights = _weights(model, hw, s, stage, fmt)
    sampler = stage is None or stage == s.pp - 1
    act, non_torch = activation_bytes(model, s, sampler=sampler), non_torch_bytes(s, hw)
    given = s.kv_cache_memory_bytes is not None
    avail = s.kv_cache_memory_bytes if given else requested - weights - act - non_torch
    assert avail is not None
    return Budget(
        cuda_total_bytes=total,
        requested_bytes=requested,
        weights_bytes=weights,
        activation_bytes=act,
        non_torch_bytes=non_torch,
        cudagraph_bytes=cudagraph_bytes(model, s),
        available_kv_bytes=avail,
        kv_cache_memory_given=given,
    )


def _weights(model: ModelSpec, hw: HardwareSpec, s: Settings, stage: int | None,
             fmt: FormatArg) -> int:
    """"Model loading took": weights (+ mxfp4 layout padding), the rope cache, MLA's
    dequantized kv_b_proj copy, the qzeros / g_idx a GPTQ kernel keeps, fp8 Marlin's 16-bit
    scales and a multimodal model's vision tower (on every stage)."""
    q, pp = s.quantization, s.pp
    extra = rope_cache_bytes(model, s.dtype) + mla_absorbed_bytes(
        model, dtype=s.dtype, quantization=q, tp=s.tp, pp=pp, stage=stage, fmt=fmt,
    ) + gptq_kernel_bytes(model, hw, quantization=q, tp=s.tp, pp=pp, stage=stage)
    extra += vision_bytes(model, s.dtype, s.tp) + expert_kernel_bytes(model, hw, s, stage)
    extra += fp8_marlin_scale_bytes(model, hw, s, stage, fmt)
    if s.dp > 1 or s.expert_parallel:
        return parallel_weights(model, hw, s, stage) + extra
    if stage is None:
        w = weight_bytes_per_gpu(model, dtype=s.dtype, quantization=q, tp=s.tp, pp=pp, fmt=fmt)
    else:
        w = stage_weight_bytes(model, dtype=s.dtype, quantization=q, tp=s.tp, pp=pp,
                               stage=stage, fmt=fmt)
    pad = mxfp4_padding_bytes(model, hw, quantization=q, tp=s.tp, pp=pp, stage=stage, fmt=fmt,
                              backend=s.mxfp4_moe_backend)
    return w + pad + extra


StageCache = tuple[int, Budget, tuple[Group, ...]]
"""(pipeline stage, its budget, its projection of the model's groups)."""


def stage_caches(
    model: ModelSpec, hw: HardwareSpec, s: Settings, kv: ModelKv | None = None,
    fmt: FormatArg = ...,
) -> tuple[list[tuple[int, LayerCacheSpec]], tuple[StageCache, ...]]:
    """(the whole model's layer specs, each GPU's cache): vLLM forms the groups from every
    stage's layers and sizes each stage's cache with its share of each group; a stage
    without cache layers is left out. ``kv``, ``fmt``: the resolved per-GPU layout and
    weight format (None, ...: from ``s``)."""
    specs = layer_specs(model, replace(s, pp=1), kv=kv)
    whole = build_groups(specs, s.block_size, s.max_model_len)
    if s.pp == 1:
        return specs, ((0, budget(model, hw, s, fmt=fmt), whole),)
    out = []
    for stage, layers in enumerate(pp_layer_ranges(model.num_layers, s.pp)):
        groups = stage_groups(whole, layers)
        if any(g.layer_ids for g in groups):
            out.append((stage, budget(model, hw, s, stage, fmt), groups))
    return specs, tuple(out)


def _fewest_blocks(stages: tuple[StageCache, ...]) -> StageCache:
    """The stage with the fewest blocks, whose num_blocks vLLM keeps for every stage (ties:
    the later stage)."""
    return min(reversed(stages), key=lambda c: _blocks(c[2], c[1].available_kv_bytes)[2])


# ---------------------------------------------------------------- the plan


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlan:
    """Budget, groups, blocks, tokens and concurrency for one model on one GPU of a deployment."""

    model: str
    gpu: str
    settings: Settings
    budget: Budget
    groups: tuple[Group, ...]
    layers_per_group: int
    num_padding_layers: int
    page_size_bytes: int
    num_blocks: int
    kv_cache_tokens: int
    pages_per_request: int
    max_concurrency: float
    hybrid: HybridBlock | None = None
    """Hybrid attention + state models: vLLM's attention block raise and state page padding."""
    stages: tuple[StageCache, ...] = ()
    """Under PP, every stage's own cache: vLLM checks each worker's layers against its own
    memory, so one request must fit on each (``budget`` and ``groups`` are the stage with
    the fewest blocks); empty at PP 1."""
    blocks_from_memory: int | None = None
    """The blocks the available memory holds, before --num-gpu-blocks-override replaces
    ``num_blocks`` (vLLM 0.11 ``may_override_num_blocks``); None: not computed."""
    spec: ModelSpec | None = field(default=None, repr=False, compare=False)
    """The model planned: a DP / EP plan's per-rank and fleet lines read its experts."""

    @property
    def kv_cache_tokens_newer_vllm(self) -> int:
        """The "GPU KV cache size" later vLLM releases print: int(max concurrency x max_model_len).

        vLLM 0.11 (and up to 0.19, vllm#40691) prints ``kv_cache_tokens`` =
        num_blocks // groups x block; vllm#38364 / #40694 replaced it by this figure (v0.24.0
        logs show token counts that are no multiple of the block). Equal for one-group models;
        for sliding-window and hybrid models it is much larger.
        """
        return int(self.max_concurrency * self.settings.max_model_len)

    @property
    def block_size(self) -> int:
        """The attention block size (state groups' blocks are max_model_len long)."""
        attn = [g.block_size for g in self.groups if not isinstance(g.spec, StateSpec)]
        return min(attn) if attn else self.groups[0].block_size


def _blocks(groups: Sequence[Group], avail: int) -> tuple[int, int, int]:
    """(layers per group, page bytes, num_blocks) as get_kv_cache_config computes them (a
    uniform-type group divides by the whole model's layers: ``Group.model_layers``)."""
    per_group = max(len(g.layer_ids) for g in groups)
    page = groups[0].page_size_bytes
    return per_group, page, max(0, avail) // page // (groups[0].model_layers or per_group)


def plan_memory(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> MemoryPlan:
    """Everything vLLM 0.11 logs at startup; DoesNotFitError when one request does not fit."""
    return plan_resolved(resolve(model, hw, engine))


def plan_resolved(r: ResolvedDeployment) -> MemoryPlan:
    """``plan_memory`` of a resolved deployment (its flags are not resolved again)."""
    plan = unchecked_resolved(r)
    _check_fits(r.model, r.gpu, r.engine, plan)
    return plan


def unchecked_plan(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> MemoryPlan:
    """The same numbers without the fit check (``capacity --json`` reports a non-fit whole)."""
    return unchecked_resolved(resolve(model, hw, engine))


def unchecked_resolved(r: ResolvedDeployment) -> MemoryPlan:
    """``unchecked_plan`` of a resolved deployment."""
    model, hw, s = r.model, r.gpu, r.settings
    specs, stages = stage_caches(model, hw, s, r.kv, r.weight_format)
    if not stages or not stages[0][2]:
        raise InputError(f"{model.name} has no cache-holding layers to plan")
    _, b, groups = _fewest_blocks(stages)
    per_group, page, from_memory = _blocks(groups, b.available_kv_bytes)
    blocks = from_memory if s.num_gpu_blocks_override is None else s.num_gpu_blocks_override
    pages = sum(g.pages_per_request(s) for g in groups)
    plan = MemoryPlan(
        model=model.name,
        gpu=hw.id,
        settings=s,
        budget=b,
        groups=groups,
        layers_per_group=per_group,
        num_padding_layers=len(groups) * per_group - sum(len(g.layer_ids) for g in groups),
        page_size_bytes=page,
        num_blocks=blocks,
        # _report_kv_cache_config: min over groups, so max_model_len when it is below the
        # attention block of a hybrid model (state groups' block = max_model_len)
        kv_cache_tokens=blocks // len(groups) * min(g.block_size for g in groups),
        pages_per_request=pages,
        max_concurrency=blocks / pages,
        hybrid=hybrid_block([sp for _, sp in specs], s.block_size),
        stages=stages if s.pp > 1 else (),
        spec=model,
        blocks_from_memory=from_memory,
    )
    return plan


# ---------------------------------------------------------------- does not fit


def _check_fits(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig, plan: MemoryPlan) -> None:
    b, s = plan.budget, plan.settings
    if b.available_kv_bytes <= 0:
        raise DoesNotFitError(
            f"no memory left for the KV cache on {hw.id}: weights {fmt_bytes(b.weights_bytes)} "
            f"+ activation {fmt_bytes(b.activation_bytes)} + non-torch "
            f"{fmt_bytes(b.non_torch_bytes)} exceed the requested {fmt_bytes(b.requested_bytes)}"
            f"{_levers(model, hw, engine)}",
            needed_bytes=b.weights_bytes + b.activation_bytes + b.non_torch_bytes,
            available_bytes=b.requested_bytes,
        )
    for stage, sb, groups in plan.stages or ((0, b, plan.groups),):
        need = needed_bytes(groups, s)
        if need > sb.available_kv_bytes:
            longest = largest_max_model_len(plan)
            fits = (f"the largest --max-model-len that fits is {longest}" if longest > 0 else
                    none_fits(groups, s))
            where = f" on pipeline stage {stage}" if plan.stages else ""
            raise KvTooSmallError(
                f"one request of {s.max_model_len} tokens needs {fmt_bytes(need)} of KV cache"
                f"{where}, only {fmt_bytes(sb.available_kv_bytes)} is available; "
                f"{fits}{_levers(model, hw, engine)}",
                needed_bytes=need,
                available_bytes=sb.available_kv_bytes,
            )


def largest_max_model_len(plan: MemoryPlan) -> int:
    """Binary search of the largest max_model_len whose one request fits (as vLLM estimates)
    on every pipeline stage."""
    caches = plan.stages or ((0, plan.budget, plan.groups),)
    return min(_largest(groups, b.available_kv_bytes, plan.settings) for _, b, groups in caches)


def _largest(groups: tuple[Group, ...], avail: int, s: Settings) -> int:
    lo, hi = 0, s.max_model_len
    while lo < hi:
        mid = (lo + hi + 1) // 2
        need = needed_bytes(groups, replace(s, max_model_len=mid))
        lo, hi = (mid, hi) if need <= avail else (lo, mid - 1)
    return lo


MAX_TP_TRIED = 64


def _levers(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> str:
    """Which single change makes it fit, each one computed; else the smallest combination."""
    singles = _single_levers(model, engine)
    fits = [_least_utilization(model, hw, engine) or label if label.startswith(_UTIL) else label
            for label, e in singles if _fits(model, hw, e)]
    tp = _smallest_fitting_tp(model, hw, engine)
    if tp is not None:
        fits.append(f"--tensor-parallel-size {tp}")
    if fits:
        return f"; fits with {' or '.join(fits)}"
    for label, e in singles:
        tp = _smallest_fitting_tp(model, hw, e)
        if tp is not None:
            return f"; fits with {label} and --tensor-parallel-size {tp}"
    return "; no combination of fp8 weights/KV, utilization 0.95 and TP up to 64 fits on this GPU"


def _single_levers(model: ModelSpec, engine: EngineConfig) -> list[tuple[str, EngineConfig]]:
    """Candidate one-flag changes (TP is searched separately)."""
    options = []
    if model_precision(model, engine.kv_cache_dtype).value_bits > 8:
        options.append(("--kv-cache-dtype fp8", replace(engine, kv_cache_dtype="fp8")))
    if engine.quantization is None and model.quantization is None:
        options.append(("--quantization fp8", replace(engine, quantization="fp8")))
    if engine.gpu_memory_utilization < 0.95:
        options.append(
            ("--gpu-memory-utilization 0.95", replace(engine, gpu_memory_utilization=0.95))
        )
    return options


_UTIL = "--gpu-memory-utilization"


def _least_utilization(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> str | None:
    """The smallest --gpu-memory-utilization in hundredths (above the given one, at most
    0.95) with which it fits; None if 0.95 does not fit either (callers check that first)."""
    lo, hi = math.floor(engine.gpu_memory_utilization * 100 + 1e-9) + 1, 95
    while lo < hi:  # fitting grows with the utilization: the least hundredth that fits
        mid = (lo + hi) // 2
        if _fits(model, hw, replace(engine, gpu_memory_utilization=mid / 100)):
            hi = mid
        else:
            lo = mid + 1
    return f"{_UTIL} {lo / 100:.2f}" if lo <= 95 else None


def _smallest_fitting_tp(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> int | None:
    """The smallest larger TP degree (doubling, dividing the heads) with which it fits."""
    tp = engine.tensor_parallel_size * 2
    while tp <= MAX_TP_TRIED and model.num_attention_heads % tp == 0:
        if _fits(model, hw, replace(engine, tensor_parallel_size=tp)):
            return tp
        tp *= 2
    return None


def _fits(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> bool:
    try:
        s = resolve_settings(model, hw, engine)
        stages = stage_caches(model, hw, s)[1]
    except InputError:
        return False
    return bool(stages) and all(b.available_kv_bytes > 0 and needed_bytes(groups, s)
                                <= b.available_kv_bytes for _, b, groups in stages)


def plan_deployment(d: Deployment) -> MemoryPlan:
    """The memory plan of one replica of ``d`` (every replica is the same)."""
    return plan_resolved(resolve_deployment(d))
