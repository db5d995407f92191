"""EngineConfig: how the server is run (parallelism, blocks, budgets, memory), validated."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.api_check import check_fields, named_fields, plain_numbers
from kvplan.errors import InputError
from kvplan.specs.engine_bounds import check_engine_bounds

MAMBA_DTYPES = ("auto", "float32")
"""vLLM 0.11's MambaDType choices (``vllm/config/cache.py``)."""
ALL2ALL_BACKENDS = ("allgather_reducescatter", "deepep_high_throughput", "deepep_low_latency",
                    "deepep")
"""Token-exchange backends kvplan prices (vLLM's VLLM_ALL2ALL_BACKEND): DeepEP's normal
(high-throughput) kernels send a token once per GPU and node holding its experts, the
low-latency ones once per (token, expert); ``deepep`` is kvplan's earlier name for the
low-latency pricing."""
MXFP4_MOE_BACKENDS = ("auto", "marlin")
"""MXFP4 MoE kernels kvplan prices (``kvplan.costs.kernels.moe``)."""
_SERVED_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16",
                  "fp16": "float16", "half": "float16", "float32": "float32",
                  "fp32": "float32", "float": "float32"}
"""--dtype names -> the dtype vLLM serves in (what --kv-cache-dtype auto then stores)."""
_FLOAT32_NAMES = ("float32", "fp32", "float")
"""Names kvplan reads as float32 (vLLM's --kv-cache-dtype takes none of them)."""
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
"""``--block-size`` values vLLM accepts (``vllm/config/cache.py`` BlockSize)."""


@named_fields
@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """vLLM engine arguments that change memory, scheduling or step cost. None = vLLM default."""

    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_memory_bytes: int | None = None
    mamba_cache_dtype: str = "auto"
    """vLLM --mamba-cache-dtype (hybrid models' conv / Gated DeltaNet state): auto or float32."""
    mamba_ssm_cache_dtype: str = "auto"
    """vLLM --mamba-ssm-cache-dtype (Mamba2 SSM state): auto (= mamba cache dtype) or float32."""
    long_prefill_token_threshold: int = 0
    """vLLM --long-prefill-token-threshold: at most this many tokens of one request per step
    (0 = no cap)."""
    max_num_partial_prefills: int = 1
    """vLLM --max-num-partial-prefills: only 1 serves on vLLM 0.11 (its V1 engine has no
    concurrent partial prefills; above 1 it does not start: ``_refuse_partial_prefills``)."""
    async_scheduling: bool = False
    """vLLM --async-scheduling: the engine schedules step n + 1 while the GPU runs step n, so
    host overheads overlap the GPU's work (``StepCostModel._finish``)."""
    data_parallel_size: int = 1
    """vLLM --data-parallel-size: engines (DP ranks) of tp x pp GPUs each, each with its own
    scheduler and KV cache; MoE layers span all dp x tp GPUs (docs/parallelism.md)."""
    enable_expert_parallel: bool = False
    """vLLM --enable-expert-parallel: routed experts split over dp x tp GPUs by expert
    instead of tensor-parallel sharded; no effect on a dense model."""
    all2all_backend: str = "allgather_reducescatter"
    """vLLM's VLLM_ALL2ALL_BACKEND for DP / EP token exchange: allgather_reducescatter (its
    default), deepep_high_throughput or deepep_low_latency (DeepEP all-to-all, EP only;
    ``deepep``: low latency); prices step time only."""
    expert_imbalance: float | None = None
    """Busiest GPU's expert load over the mean under EP (None: kvplan's cited default,
    ``kvplan.costs.step.parallel.ep_comm.DEFAULT_IMBALANCE``)."""
    enable_dbo: bool = False
    """vLLM --enable-dbo (dual batch overlap, DP + EP with DeepEP): two micro-batches whose
    token exchange runs under the other's compute (``kvplan.costs.step.parallel.overlap``)."""
    dbo_decode_token_threshold: int = 32
    """vLLM --dbo-decode-token-threshold: decode-only steps of more tokens are micro-batched."""
    dbo_prefill_token_threshold: int = 512
    """vLLM --dbo-prefill-token-threshold: steps with a prefill of more tokens are."""
    mxfp4_moe_backend: str = "auto"
    """MXFP4 experts' MoE kernel (gpt-oss): auto (the measured tables' vLLM default: Triton
    on Hopper) or marlin (vLLM before 0.12 on Hopper, where ``triton_kernels`` was not a
    dependency, or ``VLLM_MXFP4_USE_MARLIN=1``); prices step time only."""
    num_gpu_blocks_override: int | None = None
    """vLLM --num-gpu-blocks-override: the KV blocks vLLM keeps, replacing the count the free
    memory gives (after its check that one request fits in that memory)."""
    enforce_eager: bool = False
    """vLLM --enforce-eager: no CUDA graphs are captured, so their memory is 0 (capacity's
    display line); step times still assume CUDA graphs."""

    def __post_init__(self) -> None:
        plain_numbers(self)  # np.int64(4) -> 4: a whole number, as vLLM's flag would take
        check_engine_bounds(self)  # first: its messages name the vLLM flag
        check_fields(self)  # then any other type (None for a name, a str for a bool...)
        self._refuse_float32_cache()
        self._cache_dtypes_follow_dtype()
        if self.block_size not in VLLM_BLOCK_SIZES:
            sizes = ", ".join(map(str, VLLM_BLOCK_SIZES))
            raise InputError(f"--block-size must be one of vLLM's {sizes}; got {self.block_size}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise InputError(
                f"--gpu-memory-utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )
        if self.all2all_backend not in ALL2ALL_BACKENDS:
            raise InputError(f"--all2all-backend {self.all2all_backend!r}: choose one of "
                             f"{', '.join(ALL2ALL_BACKENDS)}")
        if self.mxfp4_moe_backend not in MXFP4_MOE_BACKENDS:
            raise InputError(f"--mxfp4-moe-backend {self.mxfp4_moe_backend!r}: choose one of "
                             f"{', '.join(MXFP4_MOE_BACKENDS)}")
        if self.expert_imbalance is not None and not 1.0 <= self.expert_imbalance <= 64.0:
            raise InputError("--expert-imbalance is the busiest GPU's load over the mean: "
                             f"a number in [1, 64], got {self.expert_imbalance}")
        self._refuse_partial_prefills()
        if self.async_scheduling and self.pipeline_parallel_size > 1:
            # vLLM 0.11 engine/arg_utils.py create_engine_config (since PR #19970)
            raise InputError("--async-scheduling with --pipeline-parallel-size > 1: vLLM 0.11 "
                             "refuses it; drop --async-scheduling or use -pp 1")
        for flag, name in (
            ("--mamba-cache-dtype", self.mamba_cache_dtype),
            ("--mamba-ssm-cache-dtype", self.mamba_ssm_cache_dtype),
        ):
            if name not in MAMBA_DTYPES:
                raise InputError(f"{flag} must be one of {', '.join(MAMBA_DTYPES)}, got {name!r}")

    def _refuse_partial_prefills(self) -> None:
        """vLLM 0.11.0 engine/arg_utils.py: ``_is_v1_supported_oracle`` answers False for any
        max_num_partial_prefills other than 1 ("Concurrent Partial Prefill is not supported
        by the V1 Engine. Falling back to V0."), and with V0 removed `vllm serve` stops at
        build_async_engine_client's ``assert envs.VLLM_USE_V1`` (NotImplementedError with
        VLLM_USE_V1=1): no server runs with the flag above 1."""
        if self.max_num_partial_prefills > 1:
            raise InputError(f"--max-num-partial-prefills {self.max_num_partial_prefills}: "
                             "vLLM 0.11's V1 engine has no concurrent partial prefills and "
                             "does not start with it above 1; drop the flag (a per-request "
                             "cap is --long-prefill-token-threshold)")

    def _refuse_float32_cache(self) -> None:
        """vLLM's --kv-cache-dtype has no float32 (0.11 ``CacheDType``: auto, bfloat16, fp8,
        fp8_e4m3, fp8_e5m2, fp8_inc, fp8_ds_mla; later ones add float16 and scaled formats):
        a 4-byte cache is what auto stores under --dtype float32, the one case let through
        (``_cache_dtypes_follow_dtype`` writes it so, and a copied config carries it)."""
        name = self.kv_cache_dtype.strip().lower()
        if name in _FLOAT32_NAMES and _SERVED_DTYPES.get(self.dtype.strip().lower()) != "float32":
            raise InputError(f"--kv-cache-dtype {self.kv_cache_dtype}: vLLM has no float32 KV "
                             "cache; use auto (with --dtype float32 it stores float32), "
                             "bfloat16 or fp8")

    def _cache_dtypes_follow_dtype(self) -> None:
        """vLLM's cache dtype 'auto' is the served dtype, which --dtype sets: --dtype float32
        stores a 4-byte KV cache (and Mamba state); auto keeps the model's own."""
        served = _SERVED_DTYPES.get(self.dtype.strip().lower())
        if served is None:
            return
        if self.kv_cache_dtype.strip().lower() == "auto":
            object.__setattr__(self, "kv_cache_dtype", served)
        if served == "float32" and self.mamba_cache_dtype == "auto":
            object.__setattr__(self, "mamba_cache_dtype", "float32")

    @property
    def world_size(self) -> int:
        """GPUs of one engine (one DP rank): tp x pp."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def world_size_across_dp(self) -> int:
        """GPUs of the whole ``vllm serve``: tp x pp x dp."""
        return self.world_size * self.data_parallel_size


