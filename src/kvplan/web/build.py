"""Form values -> the specs the CLI builds from its flags (construction only, no arithmetic)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.errors import InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.web.queries import (
    CapacityQuery,
    EngineQuery,
    KvQuery,
    MoeQuery,
    RequestQuery,
    SimulateQuery,
)

if TYPE_CHECKING:
    from kvplan.costs.memory.resolved import ResolvedDeployment
    from kvplan.specs.disagg import DisaggDeployment

_ENGINE = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
           "enable_expert_parallel", "kv_cache_dtype", "dtype", "quantization",
           "max_num_batched_tokens", "async_scheduling")
_MOE = ("all2all_backend", "expert_imbalance")
"""Given only when set, as the CLI passes them (None: EngineConfig's default)."""
_CAPACITY = ("gpu_memory_utilization", "max_model_len", "block_size", "max_num_seqs",
             "mamba_cache_dtype", "mamba_ssm_cache_dtype")
_TOKENS = ("max_model_len", "max_num_batched_tokens")


def cache_engine(q: KvQuery | RequestQuery, spec: ModelSpec) -> EngineConfig:
    """kv/request: cache dtype, TP and block size checked as the CLI checks them."""
    block = 16 if q.block_size is None else q.block_size  # None: vLLM's default, 16
    return _checked(EngineConfig(kv_cache_dtype=q.kv_cache_dtype, block_size=block,
                                 tensor_parallel_size=q.tensor_parallel_size), spec)


def _checked(engine: EngineConfig, spec: ModelSpec) -> EngineConfig:
    """vLLM's TP rule on this model (heads divide; KV heads split or replicate)."""
    from kvplan.specs.kv import check_tensor_parallel

    check_tensor_parallel(spec, engine.tensor_parallel_size)
    return engine


def engine_config(q: EngineQuery, spec: ModelSpec) -> EngineConfig:
    """The EngineConfig the CLI builds from the same flags, TP checked on ``spec``."""
    return _checked(_engine(q), spec)


def deployment(q: EngineQuery, spec: ModelSpec, hw: HardwareSpec) -> ResolvedDeployment:
    """The resolved deployment the CLI builds from the same flags (TP checked there, once)."""
    from kvplan.costs.memory.resolved import resolve

    return resolve(spec, hw, _engine(q))


def _engine(q: EngineQuery) -> EngineConfig:
    from kvplan.units import parse_size

    fields: dict[str, Any] = {k: getattr(q, k) for k in _ENGINE}
    if isinstance(q, CapacityQuery):
        fields.update({k: getattr(q, k) for k in _CAPACITY})
        if q.kv_cache_memory:
            fields["kv_cache_memory_bytes"] = parse_size(q.kv_cache_memory, "--kv-cache-memory")
    if isinstance(q, MoeQuery):
        fields.update({k: getattr(q, k) for k in _MOE if getattr(q, k) is not None})
    for k in _TOKENS:  # 8k / 16K, as the CLI reads them
        if k in fields:
            fields[k] = _tokens(k, fields[k])
    if isinstance(q, SimulateQuery):
        fields["enable_prefix_caching"] = q.enable_prefix_caching
        fields["enable_chunked_prefill"] = q.enable_chunked_prefill
    return EngineConfig(**fields)


def _tokens(field: str, value: int | str | None) -> int | None:
    """A token count as the CLI reads it (vLLM's human_readable_int: 8k = 8,000, 16K = 16,384),
    refused in the CLI's words (``--max-model-len not a whole number: ...``)."""
    from kvplan.units import human_readable_int

    if not isinstance(value, str):
        return value
    try:
        return human_readable_int(value)
    except ValueError as exc:
        raise InputError(f"--{field.replace('_', '-')} {exc}") from None


def workload_args(q: SimulateQuery) -> Any:
    """`vllm bench serve`'s workload flags; bundled datasets only (no client paths)."""
    from kvplan.specs.requests.workload import WorkloadArgs, check_dataset

    check_dataset(q.dataset, trace_flag=False)  # the page takes no --trace
    return WorkloadArgs(
        dataset=q.dataset, num_prompts=q.num_prompts, random_input_len=q.random_input_len,
        random_output_len=q.random_output_len, random_range_ratio=q.random_range_ratio,
        random_prefix_len=q.random_prefix_len, request_rate=q.request_rate,
        burstiness=q.burstiness, max_concurrency=q.max_concurrency, time_scale=q.time_scale,
        seed=q.seed,
    )


def disagg_deployment(q: SimulateQuery, spec: ModelSpec, hw: HardwareSpec,
                      gpu_of: Any) -> DisaggDeployment | None:
    """The disaggregated fleet the form describes, or None (no disaggregation field given):
    `kvplan simulate --disagg xPyD --prefill-gpu/--decode-gpu --prefill-tp/--decode-tp
    --kv-link --router` through the CLI's own functions (analysis/disagg/answer.py);
    ``gpu_of`` resolves a GPU name as the page does."""
    from dataclasses import replace

    from kvplan.analysis.disagg.answer import Pool, disagg_given, fleet, role_gpu, xpyd_counts
    from kvplan.specs.disagg import pool_flags

    if not disagg_given(q.model_dump()):
        return None
    try:
        x, y = xpyd_counts(q.disagg)
    except InputError as exc:  # the page has no --prefill/--decode-instances: name --disagg
        text = str(exc)
        raise InputError(text if text.startswith("--disagg") else
                         f"--disagg {q.disagg}: {text}") from None
    pools = []
    for role, n in (("prefill", x), ("decode", y)):
        given = getattr(q, f"{role}_tp")  # 0 is refused as the CLI refuses it, not -tp's
        tp = q.tensor_parallel_size if given is None else given
        try:
            engine = _checked(replace(_engine(q), tensor_parallel_size=tp), spec)
        except InputError as exc:  # -tp itself was checked first (deployment())
            raise InputError(pool_flags(str(exc), role)) from None
        name = getattr(q, f"{role}_gpu")
        gpu = role_gpu(gpu_of, name, role) if name else hw
        pools.append(Pool(gpu=gpu, engine=engine, instances=n))
    return fleet(spec, pools[0], pools[1], q.kv_link, q.router)
