"""Per-model, per-GPU constants of the step cost (the fullest pipeline stage, TP-sharded)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kvplan.memo import Memo
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

if TYPE_CHECKING:
    from kvplan.costs.memory.resolved import ResolvedDeployment
    from kvplan.costs.memory.weight_formats import FormatArg

FALLBACK_LINK_BYTES_PER_S = 32e9
"""One direction of PCIe Gen4 x16, used when a GPU description gives no interconnect."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepConstants:
    """Per-GPU coefficients of the step cost (the fullest pipeline stage, TP-sharded)."""

    gemm_flops_per_token: float
    lm_head_flops_per_request: float
    """The lm_head's FLOPs per request in the priced stage: 1/pp of them, as the last stage
    alone runs it, once a step (a step prices the fullest stage pp times)."""
    attn_flops_per_pair: float
    """Full-attention and MLA layers: FLOPs per (query token, attended token) pair (MLA: the
    absorbed decode kernel's width)."""
    mla_prefill_pair_delta: float
    """MLA only: FLOPs per pair of a prefill request (query length > 1: vLLM's MHA-style path,
    QK over qk_nope + qk_rope, PV over v_head_dim) minus the decode width's (<= 0)."""
    mla_context_flops_per_token: float
    """MLA only: FLOPs per cached context token of a prefill request (kv_b_proj up-projects
    the cached latent to K_nope and V before the MHA-style attention over it)."""
    sliding_flops_per_pair: float
    window: int
    state_flops_per_token: float
    kv_bytes_per_token: int
    """Full-attention and MLA layers: cache bytes per token (read for context, written new)."""
    sliding_kv_bytes_per_token: int
    state_bytes_per_request: int
    activation_bytes_per_token: int
    weight_bytes: int
    """Weights every step reads (non-expert weights + the active experts of one token; the
    lm_head's 1/pp, as ``lm_head_flops_per_request``)."""
    routed_expert_bytes: int
    """All routed experts on this GPU; a step touches the share its tokens route to."""
    expert_miss_per_token: float
    """1 - k/E: the chance one token leaves a given expert untouched."""
    layers: int
    """Transformer layers on the fullest pipeline stage (each pays ``layer_overhead_s``)."""
    moe_layers: int
    """Of those, layers with a routed-expert MLP (each also pays ``moe_layer_overhead_s``)."""
    allreduces: int
    allreduce_bytes_per_token: int
    tp: int
    pp: int
    compute_precision: str


def compute_precision(model: ModelSpec, engine: EngineConfig) -> str:
    """The dtype tensor cores run at: fp8/fp4/int8 for weight+activation formats, else 16-bit."""
    from kvplan.costs.memory.resolved import precision_of
    from kvplan.costs.memory.weight_formats import resolve_format

    fmt = resolve_format(engine.quantization, model.quantization, model.weight_block_size,
                         model.quant_layout)
    return precision_of(fmt, engine.dtype, model.dtype)


def gemm_dtype(model: ModelSpec, engine: EngineConfig, precision: str) -> str:
    """The measured-kernel family a GEMM runs: block-scaled fp8 (DeepSeek's 128 x 128
    scales: DeepGEMM / CUTLASS block kernels) apart from per-tensor fp8."""
    from kvplan.costs.memory.resolved import gemm_dtype_of
    from kvplan.costs.memory.weight_formats import resolve_format

    fmt = resolve_format(engine.quantization, model.quantization, model.weight_block_size,
                         model.quant_layout)
    return gemm_dtype_of(fmt, precision)


_MEMO: Memo[StepConstants] = Memo(512)
"""step_constants per (model, TP, PP, DP, EP, KV dtype, dtype, weight format, state-cache
dtypes): all it reads."""


def step_constants(model: ModelSpec, engine: EngineConfig,
                   resolved: ResolvedDeployment | None = None) -> StepConstants:
    """Every per-model, per-GPU coefficient the step cost needs, computed once per model,
    parallelism, KV dtype and weight format (a plan's other levers do not change them).
    ``resolved``: the deployment's resolved flags (None: resolved here, on a memo miss)."""
    key = (model, engine.tensor_parallel_size, engine.pipeline_parallel_size,
           engine.data_parallel_size, engine.enable_expert_parallel,
           engine.kv_cache_dtype, engine.dtype, engine.quantization,
           engine.mamba_cache_dtype, engine.mamba_ssm_cache_dtype, engine.mxfp4_moe_backend)
    return _MEMO.get(key, lambda: _step_constants(model, engine, resolved))


def _step_constants(model: ModelSpec, engine: EngineConfig,
                    resolved: ResolvedDeployment | None = None) -> StepConstants:
    from kvplan.costs.memory.params import pp_layer_ranges
    from kvplan.costs.memory.weight_formats import dtype_bytes
    from kvplan.costs.step.ops import priced_stage, tp_allreduces

    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    stage = pp_layer_ranges(model.num_layers, pp)[priced_stage(model, pp)]
    act_bytes = dtype_bytes(engine.dtype, model.dtype)  # hidden states in the served dtype
    kv = _kv_coefficients(model, engine, stage, resolved)
    fmt = ... if resolved is None else resolved.weight_format
    weights, experts, miss = _weight_coefficients(model, engine, fmt)
    mla = _mla_prefill_terms(model, tp, stage)
    hidden = model.hidden_size
    return StepConstants(
        gemm_flops_per_token=_gemm_flops_per_token(model, tp, stage),
        lm_head_flops_per_request=2.0 * model.vocab_size * hidden / tp / pp,  # last stage
        attn_flops_per_pair=_attention_coefficient(model, tp, stage, ("full", "mla")),
        mla_prefill_pair_delta=mla[0], mla_context_flops_per_token=mla[1],
        sliding_flops_per_pair=_attention_coefficient(model, tp, stage, ("sliding",)),
        window=model.sliding_window or 0,
        state_flops_per_token=4.0 * kv[3],
        kv_bytes_per_token=kv[0], sliding_kv_bytes_per_token=kv[1], state_bytes_per_request=kv[2],
        activation_bytes_per_token=2 * hidden * act_bytes * len(stage),
        weight_bytes=weights, routed_expert_bytes=experts, expert_miss_per_token=miss,
        layers=len(stage), moe_layers=_moe_layers(model, stage),
        allreduces=tp_allreduces(model, stage, tp), allreduce_bytes_per_token=hidden * act_bytes,
        tp=tp, pp=pp, compute_precision=(compute_precision(model, engine) if resolved is None
                                           else resolved.compute_precision),
    )


def _moe_layers(model: ModelSpec, stage: range) -> int:
    """Layers of ``stage`` whose MLP is routed experts (DeepSeek keeps its first k dense)."""
    if model.moe is None:
        return 0
    return sum(1 for i in stage if model.moe.routes(i))


def _gemm_flops_per_token(model: ModelSpec, tp: int, stage: range) -> float:
    """2 x the linear-layer parameters one token multiplies on this GPU (active experts only)."""
    from kvplan.costs.memory.params import layer_parts

    total = 0.0
    for layer in stage:
        for part in layer_parts(model, layer):
            if not part.linear:
                continue
            rows, cols = part.shape_on_gpu(tp)
            count = float(part.count)
            if part.role == "experts" and model.moe is not None:
                count = part.count * model.moe.experts_per_token / model.moe.num_experts
            total += 2.0 * count * rows * cols
    return total


def _attention_coefficient(
    model: ModelSpec, tp: int, stage: range, kinds: tuple[str, ...]
) -> float:
    """QK + PV FLOPs per (query, key) pair summed over this stage's layers of ``kinds``."""
    layers = sum(1 for i in stage if model.layer_kinds[i] in kinds)
    heads = max(1, model.num_attention_heads // tp)
    if model.mla is not None and "mla" in kinds:
        # absorbed MLA: scores over the latent (kv_lora_rank + rope), values over kv_lora_rank
        width = model.mla.latent_dim + model.mla.kv_lora_rank
    else:
        width = model.head_dim + model.v_head_dim
    return 2.0 * heads * width * layers


def _mla_prefill_terms(model: ModelSpec, tp: int, stage: range) -> tuple[float, float]:
    """(prefill-pair FLOPs minus decode-pair FLOPs, up-projection FLOPs per context token).

    vLLM's MLA backends (v1/attention/backends/mla/common.py) run requests with query length
    <= 1 through the absorbed decode kernel (QK over the 576-wide latent, PV over 512) and
    the rest through ``_forward_prefill``: MHA with QK head dim qk_nope + qk_rope (192) and
    V head dim v_head_dim (128), new tokens causally, and the cached context after
    kv_b_proj up-projects its latent (kv_lora_rank -> heads x (qk_nope + v)) chunk by chunk.
    """
    a = model.mla
    layers = sum(1 for i in stage if model.layer_kinds[i] == "mla")
    if a is None or not layers:
        return 0.0, 0.0
    heads = max(1, model.num_attention_heads // tp)
    decode = a.latent_dim + a.kv_lora_rank
    prefill = a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim
    up = a.kv_lora_rank * (a.qk_nope_head_dim + a.v_head_dim)
    return 2.0 * heads * (prefill - decode) * layers, 2.0 * heads * up * layers


def _kv_coefficients(
    model: ModelSpec, engine: EngineConfig, stage: range,
    resolved: ResolvedDeployment | None = None,
) -> tuple[int, int, int, int]:
    """(full+MLA bytes/token, sliding bytes/token, state bytes/request, state elements)."""
    from kvplan.specs.kv import StateSpec, kv_spec

    # the state cache is read and written at its own dtype (--mamba-*-cache-dtype)
    spec = (resolved.kv if resolved is not None
            else kv_spec(model, engine.kv_cache_dtype, engine.tensor_parallel_size,
                         mamba_cache_dtype=engine.mamba_cache_dtype,
                         mamba_ssm_cache_dtype=engine.mamba_ssm_cache_dtype))
    full = sliding = state = elements = 0
    for group in spec.groups:
        n = sum(1 for i in group.layer_ids if i in stage)
        if isinstance(group.spec, StateSpec):
            state += n * group.spec.state_bytes
            elements += n * group.spec.state_elements
        elif group.spec.kind == "sliding":
            sliding += n * group.spec.bytes_per_token
        else:
            full += n * group.spec.bytes_per_token
    return full, sliding, state, elements


def _weight_coefficients(model: ModelSpec, engine: EngineConfig,
                         fmt: FormatArg = ...) -> tuple[int, int, float]:
    """(bytes every step reads, all routed-expert bytes, 1 - k/E) on a GPU of the priced
    stage (``ops.priced_stage``)."""
    from kvplan.costs.memory.params import (
        active_weight_bytes_per_gpu,
        embedding_parts,
        weight_bytes_per_gpu,
    )
    from kvplan.costs.memory.weight_formats import dtype_bytes
    from kvplan.costs.step.ops import priced_stage

    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    stage = priced_stage(model, pp)  # the stage the step's ops and FLOPs come from
    active = active_weight_bytes_per_gpu(model, dtype=engine.dtype,
                                         quantization=engine.quantization, tp=tp, pp=pp,
                                         fmt=fmt, vocab=False, stage=stage)
    # the lm_head (or the tied table) is read once a step, by the last stage: 1/pp of it in
    # the priced stage, which a step runs pp times (an embedding lookup reads T rows only)
    rows, cols = embedding_parts(model)[0].shape_on_gpu(tp)
    head = round(rows * cols * dtype_bytes(engine.dtype, model.dtype) / pp)
    if model.moe is None:
        return active + head, 0, 1.0
    share = model.moe.experts_per_token / model.moe.num_experts
    every = weight_bytes_per_gpu(model, dtype=engine.dtype, quantization=engine.quantization,
                                 tp=tp, pp=pp, fmt=fmt, reads=True, vocab=False, stage=stage)
    routed = round((every - active) / (1.0 - share)) if share < 1 else 0
    base = active + head - round(routed * share)
    if engine.data_parallel_size > 1 or engine.enable_expert_parallel:
        return (base, *_parallel_experts(model, engine, share, stage))
    return base, routed, 1.0 - share


def _parallel_experts(model: ModelSpec, engine: EngineConfig, share: float,
                      stage: int | None = None) -> tuple[int, float]:
    """DP / EP: (routed-expert bytes this GPU holds, chance one DP rank's token, which comes
    with a token from each of the dp ranks, leaves a given local expert untouched)."""
    from kvplan.costs.memory.ep_layout import expert_weight_bytes, parallel_layout

    e = engine
    layout = parallel_layout(model, e.tensor_parallel_size, e.pipeline_parallel_size,
                             e.data_parallel_size, e.enable_expert_parallel)
    local = expert_weight_bytes(model, layout, dtype=e.dtype, quantization=e.quantization,
                                stage=stage)
    return local, (1.0 - share) ** layout.dp


def experts_touched(miss: float, tokens: Any) -> Any:
    """Share of the routed experts ``tokens`` tokens touch when each picks its top-k of E
    independently: 1 - (1 - k/E)^T, with ``miss`` = 1 - k/E (the roofline's weight bytes and
    the measured tables' routing share both count experts so)."""
    return 1.0 - np.power(miss, tokens)


def routed_share(tokens: Any, experts: int, topk: int) -> Any:
    """Distinct experts ``tokens`` tokens touch under random routing, E (1 - (1 - k/E)^T),
    over those the tables' balanced routing touches, min(E, T k). aiconfigurator's collector
    spreads each step's T k routed rows over as many experts as it can (``balanced_logits``),
    so its small-batch rows read min(E, T k) experts' weights; independent top-k picks repeat
    experts: 16 tokens of Qwen3-30B-A3B (E 128, top-8) touch 82.4 experts, not 128. A decode
    step's MoE reads weights (it turns compute-bound only at hundreds of tokens per expert,
    where both counts are E), so its time scales with the experts it touches. Applied to
    balanced tables only (A100's power-law rows route otherwise)."""
    t = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
    touched = experts_touched(1.0 - topk / experts, t)
    return touched / np.minimum(1.0, t * topk / experts)
