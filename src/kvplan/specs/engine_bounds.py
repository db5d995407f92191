"""Bounds on engine flags (EngineConfig): vLLM's positivity rules plus sane upper limits.

vLLM accepts any positive int for these; kvplan refuses values no deployment has (see
``kvplan.limits``), so a typo like ``-tp 2147483647`` or ``--max-num-seqs 2^63`` is one
clear error instead of absurd output.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import InputError
from kvplan.limits import (
    MAX_BATCH,
    MAX_KV_CACHE_BYTES,
    MAX_PARALLEL,
    MAX_TOKENS,
    check_int,
)


def check_engine_bounds(engine: Any) -> None:
    """InputError naming the flag and its range for the first out-of-range setting."""
    for flag, name in (("--dtype", engine.dtype), ("--kv-cache-dtype", engine.kv_cache_dtype),
                       ("--quantization", engine.quantization)):
        if name is not None and not isinstance(name, str):
            raise InputError(f"{flag} must be a name (text), got {name!r:.40}")
    check_int("--tensor-parallel-size", engine.tensor_parallel_size, 1, MAX_PARALLEL)
    check_int("--pipeline-parallel-size", engine.pipeline_parallel_size, 1, MAX_PARALLEL)
    check_int("--data-parallel-size", engine.data_parallel_size, 1, MAX_PARALLEL)
    for flag, value, high in (
        ("--max-model-len", engine.max_model_len, MAX_TOKENS),
        ("--max-num-seqs", engine.max_num_seqs, MAX_BATCH),
        ("--max-num-batched-tokens", engine.max_num_batched_tokens, MAX_TOKENS),
        # vLLM 0.11's BlockPool asserts num_gpu_blocks > 0 at startup
        ("--num-gpu-blocks-override", engine.num_gpu_blocks_override, MAX_TOKENS),
    ):
        if value is not None:
            check_int(flag, value, 1, high)
    check_int("--long-prefill-token-threshold", engine.long_prefill_token_threshold, 0,
              MAX_TOKENS)
    check_int("--max-num-partial-prefills", engine.max_num_partial_prefills, 1, MAX_BATCH)
    check_int("--dbo-decode-token-threshold", engine.dbo_decode_token_threshold, 0, MAX_TOKENS)
    check_int("--dbo-prefill-token-threshold", engine.dbo_prefill_token_threshold, 0,
              MAX_TOKENS)
    given = engine.kv_cache_memory_bytes
    # a non-integer is left to EngineConfig's field check, which names its type
    if isinstance(given, int) and not 0 < given <= MAX_KV_CACHE_BYTES:
        raise InputError(
            f"--kv-cache-memory must be in [1 B, 1 PiB] per GPU (e.g. 24GiB), got {given:,} bytes"
        )


def check_kv_cache_memory(given: int | None, cuda_total_bytes: int, gpu_id: str) -> None:
    """--kv-cache-memory is per GPU (vLLM's kv_cache_memory_bytes): it cannot exceed the
    memory CUDA reports on the GPU (``vllm_defaults.cuda_total_bytes``: H100 79.18 GiB, not
    the datasheet's 80 GB = 74.51 GiB), or vLLM would fail to allocate it."""
    if given is not None and given > cuda_total_bytes:
        from kvplan.units import fmt_bytes

        raise InputError(
            f"--kv-cache-memory {fmt_bytes(given)} exceeds {gpu_id}'s "
            f"{fmt_bytes(cuda_total_bytes)} of memory (CUDA total); it is per GPU, so give "
            "at most that"
        )
