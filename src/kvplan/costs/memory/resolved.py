"""A Deployment's engine flags resolved once: settings, weight format, KV layout, precisions."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.costs.memory.kv_dtype_check import check_kv_dtype
from kvplan.costs.memory.settings import Settings, settings_for
from kvplan.costs.memory.vllm_defaults import default_batch_limits
from kvplan.costs.memory.weight_formats import WeightFormat, resolve_format
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import ModelKv, kv_spec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16",
            "float32": "float32", "fp32": "float32", "float": "float32"}
"""--dtype names -> the dtype GEMMs run at: float32 runs IEEE fp32 GEMMs (PyTorch's default
``allow_tf32 = False``; vLLM 0.11 enables no TF32), not bf16 tensor-core ones."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedDeployment:
    """A Deployment with everything the layers below read off its engine flags, resolved once
    (capacity, latency, simulate and calibrate take this; nothing below re-resolves)."""

    deployment: Deployment
    settings: Settings
    """EngineConfig with vLLM's defaults filled for this model and GPU, bad values refused."""
    weight_format: WeightFormat | None
    """--quantization, else the config's own; None = unquantized."""
    kv: ModelKv
    """The per-GPU KV cache layout (at --kv-cache-dtype, TP and the Mamba state dtypes)."""
    compute_precision: str
    """The dtype GEMMs run at (fp8, fp4, int8, bfloat16, float16, float32)."""
    gemm_dtype: str
    """The measured-kernel family a GEMM runs (fp8_block apart from per-tensor fp8)."""

    @property
    def model(self) -> ModelSpec:
        return self.deployment.model

    @property
    def gpu(self) -> HardwareSpec:
        return self.deployment.gpu

    @property
    def engine(self) -> EngineConfig:
        return self.deployment.engine


def precision_of(fmt: WeightFormat | None, dtype: str, model_dtype: str) -> str:
    """The dtype tensor cores run at: fp8/fp4/int8 for those weight+activation formats (int8:
    compressed-tensors W8A8, vLLM's CUTLASS int8 ``scaled_mm``), else 16-bit."""
    if fmt is not None and fmt.name in ("fp8", "int8"):
        return fmt.name
    if fmt is not None and fmt.name == "nvfp4":
        return "fp4"
    name = dtype.strip().lower()
    return model_dtype if name == "auto" else _ALIASES.get(name, name)


def gemm_dtype_of(fmt: WeightFormat | None, precision: str) -> str:
    """Block-scaled fp8 (DeepSeek's 128 x 128 scales: DeepGEMM / CUTLASS block kernels) apart
    from per-tensor fp8; every other precision is its own family."""
    if precision == "fp8" and fmt is not None and fmt.block is not None:
        return "fp8_block"
    return precision


def resolve_deployment(d: Deployment) -> ResolvedDeployment:
    """Resolve ``d``'s engine flags once, refusing what vLLM refuses (InputError)."""
    model, engine = d.model, d.engine
    kv = kv_spec(model, engine.kv_cache_dtype, engine.tensor_parallel_size,  # TP checked there
                 mamba_cache_dtype=engine.mamba_cache_dtype,
                 mamba_ssm_cache_dtype=engine.mamba_ssm_cache_dtype)
    fmt = resolve_format(engine.quantization, model.quantization, model.weight_block_size,
                         model.quant_layout)
    settings = settings_for(model, d.gpu, engine, fmt)
    check_kv_dtype(model, d.gpu, kv.precision, engine.kv_cache_dtype)
    precision = precision_of(fmt, engine.dtype, model.dtype)
    return ResolvedDeployment(deployment=d, settings=settings, weight_format=fmt, kv=kv,
                              compute_precision=precision,
                              gemm_dtype=gemm_dtype_of(fmt, precision))


def resolve(model: ModelSpec, gpu: HardwareSpec, engine: EngineConfig) -> ResolvedDeployment:
    """``resolve_deployment`` of one replica of (model, GPU, engine)."""
    return resolve_deployment(Deployment(model=model, gpu=gpu, engine=engine))


def with_engine(r: ResolvedDeployment, engine: EngineConfig) -> ResolvedDeployment:
    """``r`` under an engine that differs in its limits only (``latency`` serves a shape at
    --max-model-len P+O): the settings refilled; weight format, KV layout, precisions kept."""
    if engine == r.engine:
        return r
    settings = settings_for(r.model, r.gpu, engine, r.weight_format)
    return replace(r, deployment=replace(r.deployment, engine=engine), settings=settings)


def step_token_budget(engine: EngineConfig, gpu: HardwareSpec) -> int:
    """The tokens one engine step may schedule: --max-num-batched-tokens, else vLLM's
    default for the GPU (8192 on >= 70 GiB non-A100 parts, else 2048), as ``Settings`` has
    it; a prefill chunk is at most this long."""
    return engine.max_num_batched_tokens or default_batch_limits(gpu)[0]
