"""Engine flags resolved for one model and GPU: vLLM 0.11's defaults filled, bad values refused."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.costs.memory import vllm_defaults as vd
from kvplan.costs.memory.fp8_blocks import check_fp8_blocks
from kvplan.costs.memory.gptq_kernels import check_moe_experts
from kvplan.costs.memory.kv_dtype_check import check_kv_dtype
from kvplan.costs.memory.weight_formats import WeightFormat, resolve_format, what_if_note
from kvplan.errors import InputError
from kvplan.specs.config_checks import FLOAT16_REFUSED
from kvplan.specs.engine_bounds import check_kv_cache_memory
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import check_tensor_parallel, model_precision
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig


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
    dp: int = 1
    """vLLM --data-parallel-size: engines of tp x pp GPUs (each sized as this plan shows)."""
    expert_parallel: bool = False
    """vLLM --enable-expert-parallel as given (in effect only on MoE models)."""
    block_size_log: str = ""
    """vLLM's INFO line when it overrides --block-size for the MLA backend, else empty."""
    mxfp4_moe_backend: str = "auto"
    """--mxfp4-moe-backend: 'marlin' stores gpt-oss's experts in Marlin's layout on Hopper."""
    quantization_note: str = ""
    """Non-empty when --quantization prices a what-if vLLM cannot start from these weights
    (``weight_formats.what_if_note``)."""
    num_gpu_blocks_override: int | None = None
    """vLLM --num-gpu-blocks-override: the blocks kept whatever the memory gives."""
    enforce_eager: bool = False
    """vLLM --enforce-eager: no CUDA graphs captured (their memory is 0)."""
    all2all_backend: str = "allgather_reducescatter"
    """--all2all-backend (VLLM_ALL2ALL_BACKEND): under DP the default all-gathers every rank's
    tokens into each MoE layer, which the profiling run's peak holds (activation.py)."""


def resolve_settings(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> Settings:
    """Fill vLLM 0.11 defaults and reject what vLLM would reject."""
    check_tensor_parallel(model, engine.tensor_parallel_size)
    check_kv_dtype(model, hw, model_precision(model, engine.kv_cache_dtype),
                   engine.kv_cache_dtype)
    fmt = resolve_format(engine.quantization, model.quantization, model.weight_block_size,
                         model.quant_layout)
    return settings_for(model, hw, engine, fmt)


def settings_for(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig,
                 fmt: WeightFormat | None) -> Settings:
    """``resolve_settings`` with TP checked and the weight format resolved by the caller."""
    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    moe_tp = _moe_tp(model, engine)
    check_fp8_blocks(model, None if fmt is None else fmt.block, tp, moe_tp)
    _check_weights_load(model, hw, engine.quantization, moe_tp)
    check_kv_cache_memory(engine.kv_cache_memory_bytes, vd.cuda_total_bytes(hw), hw.id)
    _check_tower(model, engine)
    if pp > model.num_layers:
        raise InputError(f"--pipeline-parallel-size {pp} exceeds the {model.num_layers} layers")
    max_len = engine.max_model_len or model.max_position_embeddings
    if max_len > model.max_position_embeddings and not model.max_len_assumed:
        raise InputError(
            f"--max-model-len {max_len} exceeds the model's derived max_model_len "
            f"{model.max_position_embeddings} (max_position_embeddings, scaled by "
            "rope_scaling where vLLM scales it)"
        )
    tokens = vd.default_batch_limits(hw)[0]
    _check_dtype(model, engine.dtype)
    _check_act_dtype(model, engine.dtype, fmt)
    _check_batch_limits(engine, tokens)
    _check_whole_gpu(engine, hw)
    _check_parallel(model, hw, engine)
    _check_attention_block(model, hw, engine)
    return Settings(
        tp=tp,
        pp=pp,
        block_size=mla_block_size(model, hw, engine.block_size),
        block_size_log=mla_block_log(model, hw, engine.block_size),
        gpu_memory_utilization=engine.gpu_memory_utilization,
        max_model_len=max_len,
        max_num_batched_tokens=engine.max_num_batched_tokens or tokens,
        max_num_seqs=engine.max_num_seqs or vd.default_max_num_seqs(
            hw, engine.max_num_batched_tokens),
        kv_cache_dtype=engine.kv_cache_dtype,
        dtype=engine.dtype,
        quantization=engine.quantization,
        kv_cache_memory_bytes=engine.kv_cache_memory_bytes,
        mamba_cache_dtype=engine.mamba_cache_dtype,
        mamba_ssm_cache_dtype=engine.mamba_ssm_cache_dtype,
        dp=engine.data_parallel_size,
        expert_parallel=engine.enable_expert_parallel,
        mxfp4_moe_backend=engine.mxfp4_moe_backend,
        quantization_note=what_if_note(engine.quantization, model.quantization,
                                       model.moe is not None),
        enforce_eager=engine.enforce_eager,
        num_gpu_blocks_override=engine.num_gpu_blocks_override,
        all2all_backend=engine.all2all_backend,
    )




def _check_weights_load(model: ModelSpec, hw: HardwareSpec, quantization: str | None,
                        moe_tp: int) -> None:
    """vLLM 0.11 refusals of the model on this GPU: the quantization method, the experts,
    the sparse attention."""
    _check_gpu_method(model, hw, quantization)
    check_moe_experts(model, hw, quantization, moe_tp)
    _check_sparse_mla(model, hw)


def _check_sparse_mla(model: ModelSpec, hw: HardwareSpec) -> None:
    """DeepSeek-V3.2's sparse MLA (``index_topk``) runs only on vLLM's FlashMLASparse backend,
    whose kernels (FlashMLA's sparse prefill and decode, the indexer's fp8 MQA logits) are
    built for SM 9.0 and 10.0: on an Ampere or Ada GPU the engine cannot run the model."""
    arch = hw.arch.lower()
    if model.mla is None or not model.mla.index_head_dim:
        return
    if arch.startswith(("ampere", "ada")):
        raise InputError(
            f"{model.name} on {hw.id} ({hw.arch}): vLLM 0.11 runs DeepSeek-V3.2's sparse MLA "
            "only with FlashMLASparse, whose kernels need Hopper or Blackwell (SM 9.0 / 10.0); "
            "pick an H100, H200, B200 or GB200")


def _check_gpu_method(model: ModelSpec, hw: HardwareSpec, quantization: str | None) -> None:
    """vLLM 0.11 ``VllmConfig._get_quantization_config`` refuses a method the GPU is below:
    ModelOpt FP8 (``ModelOptFp8Config.get_min_capability`` 89, no Marlin path) on Ampere,
    and ROCm's ``supported_quantization`` has no modelopt. (fp8, ModelOpt NVFP4, mxfp4 need
    8.0 and fall back to Marlin there; AWQ 7.5, GPTQ 6.0.)"""
    given = (quantization or "").strip().lower().replace("-", "_")
    method = model.quantization or (given if given not in ("", "none") else None)
    if method not in ("modelopt", "modelopt_fp8"):
        return
    arch = hw.arch.lower()
    if arch.startswith("ampere"):
        raise InputError(
            f"ModelOpt FP8 weights on {hw.id} ({hw.arch}): vLLM refuses to start (\"The "
            "quantization method modelopt is not supported for the current GPU. Minimum "
            "capability: 89\"); use an Ada, Hopper or Blackwell GPU, or an fp8 / "
            "compressed-tensors checkpoint (served weight-only through Marlin on Ampere)")
    if arch.startswith("cdna"):
        raise InputError(f"ModelOpt FP8 weights on {hw.id}: vLLM refuses to start (\"modelopt "
                         "quantization is currently not supported in ROCm\"); use an fp8 or "
                         "compressed-tensors checkpoint")


def _check_dtype(model: ModelSpec, dtype: str) -> None:
    if model.model_type in FLOAT16_REFUSED and dtype.strip().lower() in (
            "float16", "fp16", "half"):
        raise InputError(f"--dtype {dtype}: vLLM refuses float16 for model type "
                         f"{model.model_type!r} (numerical instability); use --dtype bfloat16 "
                         "or float32")


def _check_act_dtype(model: ModelSpec, dtype: str, fmt: WeightFormat | None) -> None:
    """vLLM 0.11 ``VllmConfig._get_quantization_config`` refuses a served dtype outside the
    format's ``get_supported_act_dtypes``: fp8, awq / gptq (Marlin), nvfp4 take float16 and
    bfloat16, mxfp4 bfloat16 only; none takes float32."""
    if fmt is None:
        return
    name = dtype.strip().lower()
    served = model.dtype if name == "auto" else _SERVED.get(name, name)
    allowed = ("bfloat16",) if fmt.name == "mxfp4" else ("bfloat16", "float16")
    if served not in allowed:
        raise InputError(f"--dtype {dtype}: vLLM refuses {served} for {fmt.name} weights "
                         f"(\"torch.{served} is not supported for quantization method\"; "
                         f"its kernels take {' or '.join(allowed)}); use --dtype {allowed[0]}")


_SERVED = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32",
           "float": "float32"}
"""--dtype aliases -> the dtype vLLM serves in."""


def _check_tower(model: ModelSpec, engine: EngineConfig) -> None:
    """Refuse to size the KV cache of a multimodal model whose encoder kvplan does not price
    (``specs/towers/vision_config.py``): vLLM loads and profiles it, so the KV cache would
    come out too large. A KV cache size given by --kv-cache-memory does not depend on it."""
    if model.unpriced_tower is not None and engine.kv_cache_memory_bytes is None:
        raise InputError(
            f"kvplan does not price the encoder of {model.unpriced_tower}: vLLM loads its "
            "weights and profiles it before sizing the KV cache, so kvplan's KV cache would "
            "come out too large; give the size with --kv-cache-memory (or price the text "
            "model's own config)")


def _check_batch_limits(engine: EngineConfig, default_tokens: int) -> None:
    """vLLM's SchedulerConfig check on the two budgets: it refuses to start when
    max_num_batched_tokens < max_num_seqs, a budget the GPU class defaulted (``default_tokens``,
    set by _set_default_args before the check) too. A defaulted max_num_seqs is capped instead
    (``vllm_defaults.default_max_num_seqs``). Its refusal of a budget below max_model_len
    without chunked prefill never fires in 0.11.0: _set_default_args turns chunked prefill
    back on for generating models (``analysis.serving.scheduler_limits``)."""
    tokens, seqs = engine.max_num_batched_tokens, engine.max_num_seqs
    if seqs is None or (tokens or default_tokens) >= seqs:
        return
    given = (f"--max-num-batched-tokens {tokens}" if tokens is not None else
             f"the GPU's default --max-num-batched-tokens {default_tokens}")
    raise InputError(f"{given} is below --max-num-seqs {seqs}: vLLM refuses to start "
                     "(max_num_batched_tokens must be >= max_num_seqs); raise it to "
                     f"{seqs} or lower --max-num-seqs")


def _check_whole_gpu(engine: EngineConfig, hw: HardwareSpec) -> None:
    """vLLM 0.11's worker refuses to start when the free memory at startup is below
    utilization x the CUDA total ("Free memory on device ... is less than desired GPU memory
    utilization"); the process's own CUDA context is never free, so 1.0 always fails."""
    if engine.gpu_memory_utilization >= 1.0:
        from kvplan.units import fmt_bytes

        raise InputError(
            f"--gpu-memory-utilization {engine.gpu_memory_utilization}: vLLM refuses to start: "
            f"the free memory at startup ({hw.id}'s {fmt_bytes(vd.cuda_total_bytes(hw))} less "
            "the CUDA context) is below all of it; give less, e.g. 0.95")


def _moe_tp(model: ModelSpec, engine: EngineConfig) -> int:
    """The routed experts' TP degree (tp; tp x dp under DP; 1 under EP)."""
    e = engine
    if e.data_parallel_size == 1 and not e.enable_expert_parallel:
        return e.tensor_parallel_size
    from kvplan.costs.memory.ep_layout import parallel_layout

    return parallel_layout(model, e.tensor_parallel_size, e.pipeline_parallel_size,
                           e.data_parallel_size, e.enable_expert_parallel).moe_tp


def _check_parallel(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> None:
    """DP / EP layouts vLLM cannot run, or that span nodes with no known interconnect."""
    from kvplan.costs.memory.ep_layout import check_fits_nodes, parallel_layout

    e = engine
    if e.data_parallel_size == 1 and not e.enable_expert_parallel:
        return
    layout = parallel_layout(model, e.tensor_parallel_size, e.pipeline_parallel_size,
                             e.data_parallel_size, e.enable_expert_parallel)
    check_fits_nodes(layout, hw)


_FA_HEAD_SIZES = (32, 64, 96, 128, 160, 192, 224, 256)
"""Head sizes vLLM 0.11's FlashAttention backend takes (others fall back to FlexAttention)."""


def _check_attention_block(model: ModelSpec, hw: HardwareSpec, engine: EngineConfig) -> None:
    """vLLM 0.11's default backend for non-MLA attention asserts "Block size must be a multiple
    of 16." when it shapes the cache (``get_kv_cache_shape``): FlashAttention on SM 8.x / 9.x
    (16-bit, head sizes ``_FA_HEAD_SIZES``), Triton for sinks or an fp8 cache on SM 8.x, and
    ROCm's Triton / ROCm kernels. Not refused: Blackwell (FlashInfer, any page size), the
    FlexAttention fallback (other head sizes, float32), MLA off Hopper / Blackwell (Triton
    MLA), state-only models, and hybrids (their attention block is raised to a multiple of
    16). An nvfp4 cache needs a multiple of 4 on any GPU (its cache write's check)."""
    block, arch = engine.block_size, hw.arch.lower()
    if engine.kv_cache_dtype.strip().lower() == "nvfp4" and block % 4:
        raise InputError(f"--block-size {block}: vLLM's nvfp4 KV cache write refuses it "
                         "('NVFP4 KV cache requires block_size to be a multiple of 4.'); use "
                         "16, 32, 64 or 128")
    if block % vd.DEFAULT_BLOCK_SIZE == 0 or arch.startswith(("blackwell", "tpu")):
        return
    if model.mla is not None or model.state_layers or not any(
            k in ("full", "sliding") for k in model.layer_kinds):
        return
    triton = arch.startswith("cdna") or (not arch.startswith("hopper") and (
        model.model_type == "gpt_oss" or engine.kv_cache_dtype.startswith("fp8")))
    flash = model.head_dim in _FA_HEAD_SIZES and engine.dtype.strip().lower() not in (
        "float32", "fp32", "float")
    if triton or flash:
        raise InputError(
            f"--block-size {block}: vLLM 0.11's default attention backend for {model.name} on "
            f"{hw.id} ({'Triton' if triton else 'FlashAttention'}) refuses it ('Block size "
            "must be a multiple of 16.'); use 16, 32, 64 or 128")


def mla_block_size(model: ModelSpec, hw: HardwareSpec, block: int) -> int:
    """The block an MLA model gets: vLLM 0.11.0 (``platforms/cuda.py`` check_and_update_config)
    sets its default MLA backend's block size whenever --block-size differs from it
    (``if ... cache_config.block_size != 64: cache_config.block_size = 64``), a multiple
    included: --block-size 128 on an H100 runs blocks of 64.

    Hopper: FlashMLA, 64 ("Forcing kv cache block size to 64 for FlashMLA backend.");
    Blackwell: CUTLASS MLA, 128. Other GPUs (Triton MLA) keep --block-size. DeepSeek-V3.2
    (sparse MLA, ``index_topk``) gets 64 on every GPU, after the rest (vLLM's own comment
    calls it a stopgap: ``if use_sparse and cache_config.block_size != 64``).
    """
    if model.mla is None:
        return block
    if model.mla.index_head_dim:  # DeepSeek-V3.2: "... to 64 for FlashMLASparse backend."
        return vd.FLASHMLA_BLOCK_SIZE
    need = vd.mla_kernel_block_size(hw)
    return block if need is None else need


def prefix_caching_runs(model: ModelSpec, requested: bool) -> bool:
    """Whether vLLM 0.11.0 runs prefix caching: a model with state layers (Mamba, Gated
    DeltaNet: Nemotron-H, Qwen3-Next) has it turned off whatever the flag says
    (MambaModelConfig: "Hybrid or mamba-based model detected: disabling prefix caching since
    it is not yet supported."); every other model runs what was asked."""
    return requested and not model.state_layers


def mla_block_log(model: ModelSpec, hw: HardwareSpec, block: int) -> str:
    """The line vLLM 0.11 logs when it replaces ``block`` (platforms/cuda.py), else ''.

    e.g. DeepSeek-V3 on an H100 with --block-size 16: "Forcing kv cache block size to 64 for
    FlashMLA backend."; on a B200: "... to 128 for CUTLASS_MLA backend."
    """
    forced = mla_block_size(model, hw, block)
    if forced == block:
        return ""
    backend = vd.mla_backend_name(hw)
    if model.mla and model.mla.index_head_dim and vd.mla_kernel_block_size(hw) != forced:
        backend = "FlashMLASparse"  # the last of vLLM's lines (FlashMLA's 64 needs no second)
    return f"Forcing kv cache block size to {forced} for {backend} backend."
