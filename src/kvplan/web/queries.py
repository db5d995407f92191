"""The forms' fields, named as vLLM's flags (snake_case), typed; kvplan checks the values."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

Name = Field(min_length=1, max_length=200)
Tokens = int | str | None
"""A token count vLLM reads with human_readable_int (8192, 8k = 8,000, 8K = 8,192): kept as
the text given and read as the CLI reads it (units.human_readable_int; build.py, plan/args.py)."""


class Query(BaseModel):
    """Unknown fields are refused, so a typo'd flag is a 422 and not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class KvQuery(Query):
    model: str = Name
    kv_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1
    block_size: int | None = None
    """None: vLLM's default 16 (an MLA model's answer then notes the block vLLM forces)."""


class LeversQuery(Query):
    model: str = Name
    batch: int = 1
    context: int = 4096


class RequestQuery(Query):
    model: str = Name
    prompt: int
    output: int
    chunk: int | None = None
    block_size: int | None = None
    kv_cache_dtype: str = "auto"
    tensor_parallel_size: int = 1


class EngineQuery(Query):
    """Engine flags shared by capacity, latency and simulate (None = vLLM's default)."""

    model: str = Name
    gpu: str = "H100"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    quantization: str | None = None
    max_num_batched_tokens: Tokens = None
    async_scheduling: bool = False


class CapacityQuery(EngineQuery):
    gpu_memory_utilization: float = 0.9
    max_model_len: Tokens = None
    block_size: int = 16
    max_num_seqs: int | None = None
    kv_cache_memory: str | None = None
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"


class MoeQuery(Query):
    """The CLI's MoE exchange flags (latency and simulate; None = kvplan's default)."""

    all2all_backend: str | None = Field(default=None, max_length=64)
    expert_imbalance: float | None = None


class LatencyQuery(MoeQuery, EngineQuery):
    prompt: int
    output: int
    batch: int = 1


class SweepQuery(LatencyQuery):
    sweep: str = "batch=1,2,4,8,16,32,64,128,256,512"


class SimulateQuery(MoeQuery, CapacityQuery):
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    dataset: str = "random"
    num_prompts: int | None = None
    """None: the CLI's default (random, sharegpt: 1000; a trace: its dataset's); the page's
    form fills in 200."""
    random_input_len: int = 1024
    random_output_len: int = 128
    random_range_ratio: float = 0.0
    random_prefix_len: int = 0
    request_rate: float | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0
    time_scale: float = 1.0
    goodput: str | None = None
    percentile_metrics: str = "ttft,tpot,itl,e2el"
    metric_percentiles: str = "99"
    disagg: str | None = Field(default=None, max_length=16)
    """`--disagg xPyD`: any of these six makes the fleet disaggregated (as on the CLI)."""
    prefill_gpu: str | None = Field(default=None, max_length=64)
    decode_gpu: str | None = Field(default=None, max_length=64)
    prefill_tp: int | None = None
    decode_tp: int | None = None
    kv_link: str | None = Field(default=None, max_length=32)
    router: str | None = Field(default=None, max_length=32)


class PlanQuery(Query):
    """`kvplan plan`'s flags the page offers (comma lists as text, as on the command line)."""

    model: str = Name
    slo: str | None = None
    """`--slo` terms, space-separated (None: refused unless goodput, as `kvplan plan`)."""
    goodput: str | None = None
    """`--goodput` terms, space-separated (ttft:MS tpot:MS e2el:MS), as on the CLI."""
    gpu: str | None = None
    tensor_parallel_size: str | None = None
    pipeline_parallel_size: str = "1"
    data_parallel_size: str | None = None
    """MoE models: a comma list (None: 1, 2, 4, 8 within one node; dense models: 1)."""
    enable_expert_parallel: str | None = None
    """MoE models: on,off (None: both with DP, off at DP 1)."""
    kv_cache_dtype: str = "auto"
    quantization: str = "none"
    max_num_seqs: str = "default"
    max_num_batched_tokens: str = "512,2048,default"
    """The CLI's default chunk sizes (analysis/plan_args.DEFAULT_CHUNK_TEXT)."""
    block_size: str = "16"
    enable_prefix_caching: str = "on"
    gpu_memory_utilization: float = 0.9
    max_model_len: Tokens = None
    router: str = "round-robin"
    provider: str | None = None
    """`--provider` (None: runpod-secure, as `kvplan plan`)."""
    price: str | None = Field(default=None, max_length=400)
    """`--price GPU=USD` items (USD per GPU-hour), comma- or space-separated."""
    search: str = "funnel"
    slo_margin: str = "none"
    dataset: str = "random"
    num_prompts: int | None = None
    """None: the CLI's default (random, sharegpt: 1000; a trace: its first 10000); the page's
    form fills in 200."""
    random_input_len: int = 1024
    random_output_len: int = 128
    request_rate: float | None = None
    """Fleet req/s, as `kvplan plan --request-rate` (None: a timed trace's own arrivals;
    random or a length-only trace: one replica at its capacity)."""
    seed: int = 0
    disagg: bool = False
    """`kvplan plan --disagg`: also search xPyD prefill/decode fleets (the `joint` key)."""
    kv_link: str | None = Field(default=None, max_length=200)
    """Their KV links, a comma list (default ib-ndr)."""
    async_scheduling: bool = False
    """`kvplan plan --async-scheduling`: every candidate schedules ahead (vLLM 0.11: off)."""
