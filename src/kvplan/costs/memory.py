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

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvplan.costs import vllm_defaults as vd
from kvplan.costs.params import weight_bytes_per_gpu
from kvplan.errors import DoesNotFitError, InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import (
    LayerCacheSpec,
    SlidingWindowSpec,
    StateSpec,
    check_tensor_parallel,
    layer_cache_spec,
    resolve_precision,
)
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import cdiv, fmt_bytes

# ---------------------------------------------------------------- resolved settings


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """EngineConfig with every vLLM default filled in for this model and GPU."""

    tp: int
    pp: int
    block_size: int
    gpu_memory_utilization: float
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    kv_cache_dtype: str
    dtype: str
    quantization: str | None
    kv_cache_memory_bytes: int | None
    mamba_cache_dtype: str = "auto"
    """vLLM --mamba-cache-dtype: conv (and Gated DeltaNet) state; 'auto' = model dtype."""
    mamba_ssm_cache_dtype: str = "auto"
    """vLLM --mamba-ssm-cache-dtype: Mamba2 SSM state; 'auto' = the conv state's dtype."""


def resolve_settings(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> Settings:
    """Fill vLLM 0.11 defaults and reject what vLLM would reject."""
    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    check_tensor_parallel(model, tp)
    if pp > model.num_layers:
        raise InputError(f"--pipeline-parallel-size {pp} exceeds the {model.num_layers} layers")
    max_len = engine.max_model_len or model.max_position_embeddings
    if max_len > model.max_position_embeddings:
        raise InputError(
            f"--max-model-len {max_len} exceeds the model's "
            f"max_position_embeddings {model.max_position_embeddings}"
        )
    tokens, seqs = vd.default_batch_limits(hw)
    return Settings(
        tp=tp,
        pp=pp,
        block_size=engine.block_size,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        max_model_len=max_len,
        max_num_batched_tokens=engine.max_num_batched_tokens or tokens,
        max_num_seqs=engine.max_num_seqs or seqs,
        kv_cache_dtype=engine.kv_cache_dtype,
        dtype=engine.dtype,
        quantization=engine.quantization,
        kv_cache_memory_bytes=engine.kv_cache_memory_bytes,
        mamba_cache_dtype=engine.mamba_cache_dtype,
        mamba_ssm_cache_dtype=engine.mamba_ssm_cache_dtype,
    )


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


def _dtype_bytes(model: ModelSpec) -> int:
    return 4 if model.dtype == "float32" else 2


def rope_cache_bytes(model: ModelSpec) -> int:
    """vLLM's rotary cos/sin cache: max_position_embeddings x rotary_dim, model dtype."""
    rotary = model.mla.qk_rope_head_dim if model.mla is not None else model.head_dim
    return model.max_position_embeddings * rotary * _dtype_bytes(model)


def activation_bytes(model: ModelSpec, s: Settings) -> int:
    """Torch peak during the profiling run: kept hidden states + max(layer, sampler) peak.

    The sampler term dominates: min(max_num_seqs, tokens) requests x vocab logits.
    """
    t, h, b = s.max_num_batched_tokens, model.hidden_size, _dtype_bytes(model)
    resident = 2 * t * h * b  # hidden states + residual stream
    reqs = min(s.max_num_seqs, t)
    sampler = reqs * model.vocab_size * (b + vd.SAMPLER_FP32_BYTES_PER_LOGIT)
    return resident + max(sampler, _layer_transient_bytes(model, t, s.tp))


def _layer_transient_bytes(model: ModelSpec, tokens: int, tp: int) -> int:
    """Largest per-layer intermediate: the MLP's up projection and activation output."""
    inter = model.intermediate_size
    width = inter * (3 if model.mlp_gated else 2)
    if model.moe is not None:
        moe = model.moe
        width = max(width, moe.experts_per_token * moe.moe_intermediate_size * 3)
    return tokens * width // tp * _dtype_bytes(model)


def non_torch_bytes(s: Settings) -> int:
    """CUDA context growth plus, with more than one GPU, communication buffers."""
    comm = vd.COMM_BUFFER_BYTES if s.tp * s.pp > 1 else 0
    return vd.NON_TORCH_BASE_BYTES + comm


def cudagraph_bytes(model: ModelSpec, s: Settings) -> int:
    """Graph pool estimate: the largest captured batch's layer intermediates (display only)."""
    batch = min(vd.CUDAGRAPH_MAX_CAPTURE, 2 * s.max_num_seqs)
    return _layer_transient_bytes(model, batch, s.tp) + 4 * batch * model.hidden_size * 2


def budget(model: ModelSpec, hw: HardwareSpec, s: Settings) -> Budget:
    """The per-GPU memory budget; ``kv_cache_memory_bytes`` replaces the estimate exactly."""
    total = vd.cuda_total_bytes(hw)
    requested = int(total * s.gpu_memory_utilization)
    weights = weight_bytes_per_gpu(
        model, dtype=s.dtype, quantization=s.quantization, tp=s.tp, pp=s.pp
    ) + rope_cache_bytes(model)
    act, non_torch = activation_bytes(model, s), non_torch_bytes(s)
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


# ---------------------------------------------------------------- groups and blocks


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """One KV cache group: layers of one spec (``None`` entries are vLLM's padding layers).

    ``block_size`` is the attention block for attention groups and vLLM's
    ``mamba_block_size`` (= max_model_len: one page holds a whole state) for state groups.
    """

    spec: LayerCacheSpec
    layer_ids: tuple[int, ...]
    block_size: int

    @property
    def page_size_bytes(self) -> int:
        return self.spec.page_size_bytes(self.block_size)

    def pages_per_request(self, s: Settings) -> int:
        """Pages one request at max_model_len needs (``max_memory_usage_bytes`` / page)."""
        spec = self.spec
        if isinstance(spec, StateSpec):
            return 1  # MambaSpec: cdiv(max_model_len, mamba_block_size = max_model_len) = 1
        if isinstance(spec, SlidingWindowSpec):
            tokens = min(spec.window - 1 + s.max_num_batched_tokens, s.max_model_len)
            return cdiv(tokens, self.block_size) + 1
        return cdiv(s.max_model_len, self.block_size)


def layer_specs(model: ModelSpec, s: Settings) -> list[tuple[int, LayerCacheSpec]]:
    """(layer id, spec) of every cache-holding layer on the first pipeline stage's GPU."""
    precision = resolve_precision(s.kv_cache_dtype, model.dtype)
    from kvplan.costs.params import pp_layer_ranges

    layers = max(pp_layer_ranges(model.num_layers, s.pp), key=len)
    out = []
    for i in layers:
        spec = layer_cache_spec(
            model,
            i,
            precision,
            s.tp,
            mamba_cache_dtype=s.mamba_cache_dtype,
            mamba_ssm_cache_dtype=s.mamba_ssm_cache_dtype,
        )
        if spec is not None:
            out.append((i, spec))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridBlock:
    """vLLM 0.11 ``HybridAttentionMambaModelConfig.verify_and_update_config`` for one model."""

    block_size: int
    """Attention block: the user's --block-size, raised to ``aligned_block_size`` if smaller."""
    aligned_block_size: int
    """alignment x cdiv(state page, alignment x attention bytes per token)."""
    state_page_bytes: int
    """The unpadded state page (vLLM ``MambaSpec(...).page_size_bytes``)."""
    page_size_padded: int | None
    """``mamba_page_size_padded``: block_size x attention bytes per token, None if equal."""

    @property
    def padding_pct(self) -> float:
        """vLLM's "Padding mamba page size by X% to ensure ... exactly equal"."""
        if self.page_size_padded is None:
            return 0.0
        return 100 * (self.page_size_padded - self.state_page_bytes) / self.state_page_bytes


def hybrid_block(specs: Sequence[LayerCacheSpec], block: int) -> HybridBlock | None:
    """The attention block size and state padding of a hybrid attention + state model
    (None when the model is not hybrid)::

        attn_block = 16 x cdiv(state_page, 16 x attn_page_size_1_token)
        block      = attn_block if --block-size < attn_block else --block-size
        padded     = block x attn_page_size_1_token     (the state page is padded to it)
    """
    states = [sp for sp in specs if isinstance(sp, StateSpec)]
    attn = [sp for sp in specs if not isinstance(sp, StateSpec)]
    if not states or not attn:
        return None
    state_page = max(sp.state_bytes for sp in states)  # vLLM builds one model-wide MambaSpec
    per_token = max(sp.page_size_bytes(1) for sp in attn)
    align = vd.HYBRID_KERNEL_BLOCK_ALIGNMENT
    aligned = align * cdiv(state_page, align * per_token)
    block = max(block, aligned)
    padded = block * per_token
    return HybridBlock(
        block_size=block,
        aligned_block_size=aligned,
        state_page_bytes=state_page,
        page_size_padded=None if padded == state_page else padded,
    )


def build_groups(
    specs: Sequence[tuple[int, LayerCacheSpec]], block: int, max_model_len: int
) -> tuple[Group, ...]:
    """vLLM's grouping: one group if all layers match, else equal-size groups per spec
    (``_get_kv_cache_groups_uniform_page_size``), after the hybrid page alignment."""
    hybrid = hybrid_block([sp for _, sp in specs], block)
    if hybrid is not None:
        block = hybrid.block_size
    by_spec: dict[LayerCacheSpec, list[int]] = {}
    for layer, spec in specs:
        if isinstance(spec, StateSpec) and hybrid is not None:
            spec = replace(spec, page_size_padded=hybrid.page_size_padded)
        by_spec.setdefault(spec, []).append(layer)
    sizes = [len(v) for v in by_spec.values()]
    size = min(sizes)
    if max(sizes) < size * 1.25:
        size = max(sizes)
    groups = []
    for spec, layers in by_spec.items():
        n = cdiv(len(layers), size)
        spec_block = max_model_len if isinstance(spec, StateSpec) else block
        groups += [
            Group(spec=spec, layer_ids=tuple(layers[i::n]), block_size=spec_block) for i in range(n)
        ]
    return tuple(groups)


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

    @property
    def block_size(self) -> int:
        """The attention block size (state groups' blocks are max_model_len long)."""
        attn = [g.block_size for g in self.groups if not isinstance(g.spec, StateSpec)]
        return min(attn) if attn else self.groups[0].block_size


def _blocks(groups: Sequence[Group], avail: int) -> tuple[int, int, int]:
    """(layers per group, page bytes, num_blocks) as get_kv_cache_config computes them."""
    per_group = max(len(g.layer_ids) for g in groups)
    page = groups[0].page_size_bytes
    return per_group, page, max(0, avail) // page // per_group


def needed_bytes(groups: Sequence[Group], s: Settings) -> int:
    """vLLM's check_enough_kv_cache_memory: every layer's max usage for one request."""
    return sum(len(g.layer_ids) * g.pages_per_request(s) * g.page_size_bytes for g in groups)


def plan_memory(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> MemoryPlan:
    """Everything vLLM 0.11 logs at startup; DoesNotFitError when one request does not fit."""
    s = resolve_settings(model, hw, engine)
    b = budget(model, hw, s)
    specs = layer_specs(model, s)
    groups = build_groups(specs, s.block_size, s.max_model_len)
    if not groups:
        raise InputError(f"{model.name} has no cache-holding layers to plan")
    per_group, page, blocks = _blocks(groups, b.available_kv_bytes)
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
    )
    _check_fits(model, hw, engine, plan)
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
    need = needed_bytes(plan.groups, s)
    if need > b.available_kv_bytes:
        longest = largest_max_model_len(plan)
        raise DoesNotFitError(
            f"one request of {s.max_model_len} tokens needs {fmt_bytes(need)} of KV cache, "
            f"only {fmt_bytes(b.available_kv_bytes)} is available; the largest "
            f"--max-model-len that fits is {longest}{_levers(model, hw, engine)}",
            needed_bytes=need,
            available_bytes=b.available_kv_bytes,
        )


def largest_max_model_len(plan: MemoryPlan) -> int:
    """Binary search of the largest max_model_len whose one request fits (as vLLM estimates)."""
    lo, hi = 0, plan.settings.max_model_len
    while lo < hi:
        mid = (lo + hi + 1) // 2
        need = needed_bytes(plan.groups, replace(plan.settings, max_model_len=mid))
        lo, hi = (mid, hi) if need <= plan.budget.available_kv_bytes else (lo, mid - 1)
    return lo


MAX_TP_TRIED = 64


def _levers(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> str:
    """Which single change makes it fit, each one computed; else the smallest combination."""
    singles = _single_levers(model, engine)
    fits = [label for label, e in singles if _fits(model, hw, e)]
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
    if resolve_precision(engine.kv_cache_dtype, model.dtype).value_bits > 8:
        options.append(("--kv-cache-dtype fp8", replace(engine, kv_cache_dtype="fp8")))
    if engine.quantization is None and model.quantization is None:
        options.append(("--quantization fp8", replace(engine, quantization="fp8")))
    if engine.gpu_memory_utilization < 0.95:
        options.append(
            ("--gpu-memory-utilization 0.95", replace(engine, gpu_memory_utilization=0.95))
        )
    return options


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
        b = budget(model, hw, s)
        groups = build_groups(layer_specs(model, s), s.block_size, s.max_model_len)
    except InputError:
        return False
    return b.available_kv_bytes > 0 and needed_bytes(groups, s) <= b.available_kv_bytes
