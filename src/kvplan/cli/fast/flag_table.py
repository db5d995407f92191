"""vLLM's engine flags as a table, without typer: names, parsers, help, and the parse of one
value (``8k`` for --max-model-len, ``24GiB`` for memory). cli/flags.py declares the typer
options from it; the typer-free `simulate` path (fast/simulate_args.py) reads it directly."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.errors import InputError
from kvplan.units import human_readable_int as human_readable_int  # re-exported


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"expects true or false, got {text!r}")


@dataclass(frozen=True, slots=True)
class Flag:
    """One vLLM engine flag: the EngineConfig field it sets, vLLM's names, its parser, help."""

    field: str
    names: tuple[str, ...]
    parse: Callable[[str], Any]
    help: str

    @property
    def is_bool(self) -> bool:
        return self.parse is _bool


FLAGS: tuple[Flag, ...] = (
    Flag("tensor_parallel_size", ("--tensor-parallel-size", "-tp"), int, "Tensor-parallel GPUs."),
    Flag("pipeline_parallel_size", ("--pipeline-parallel-size", "-pp"), int,
         "Pipeline-parallel stages."),
    Flag("data_parallel_size", ("--data-parallel-size", "-dp"), int,
         "Data-parallel engines (DP ranks), each tp x pp GPUs with its own KV cache."),
    Flag("enable_expert_parallel", ("--enable-expert-parallel",), _bool,
         "MoE: split routed experts over dp x tp GPUs instead of TP-sharding them."),
    Flag("gpu_memory_utilization", ("--gpu-memory-utilization",), float,
         "Share of GPU memory vLLM may use (default 0.9)."),
    Flag("max_model_len", ("--max-model-len",), human_readable_int,
         "Longest request in tokens, as vLLM reads it: 8192, 8k (8,000), 8K (8,192)."),
    Flag("kv_cache_dtype", ("--kv-cache-dtype",), str,
         "auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, int8_per_token_head, "
         "fp8_per_token_head, nvfp4; fp8_ds_mla (DeepSeek-V3.2 only)."),
    Flag("dtype", ("--dtype",), str, "auto, bfloat16, float16, float32."),
    Flag("quantization", ("--quantization", "-q"), str, "Weight format: fp8, awq, gptq, ..."),
    Flag("block_size", ("--block-size",), int, "Tokens per KV block (vLLM default 16)."),
    Flag("max_num_batched_tokens", ("--max-num-batched-tokens",), human_readable_int,
         "Token budget per engine step (8192, 8k, 8K)."),
    Flag("max_num_seqs", ("--max-num-seqs",), int, "Most requests running at once."),
    Flag("kv_cache_memory_bytes", ("--kv-cache-memory", "--kv-cache-memory-bytes"), str,
         "KV cache size (e.g. 24GiB); skips the memory estimate."),
    Flag("num_gpu_blocks_override", ("--num-gpu-blocks-override",), int,
         "KV blocks vLLM keeps instead of those the free memory holds."),
    Flag("enable_chunked_prefill", ("--enable-chunked-prefill",), _bool,
         "Split long prefills over steps (vLLM v1 default on)."),
    Flag("enable_prefix_caching", ("--enable-prefix-caching",), _bool,
         "Reuse cached prompt prefixes (vLLM v1 default on)."),
    Flag("long_prefill_token_threshold", ("--long-prefill-token-threshold",), int,
         "Most tokens of one request per step (0 = no cap)."),
    Flag("max_num_partial_prefills", ("--max-num-partial-prefills",), int,
         "Only 1: vLLM 0.11's V1 engine does not start with more."),
    Flag("mamba_cache_dtype", ("--mamba-cache-dtype",), str, "Hybrid models: auto or float32."),
    Flag("mamba_ssm_cache_dtype", ("--mamba-ssm-cache-dtype",), str,
         "Mamba2 SSM state dtype: auto or float32."),
    Flag("enable_dbo", ("--enable-dbo",), _bool,
         "MoE DP + EP with DeepEP: two micro-batches, exchange under compute."),
    Flag("dbo_decode_token_threshold", ("--dbo-decode-token-threshold",), int,
         "DBO: decode-only steps of more tokens are split (vLLM default 32)."),
    Flag("dbo_prefill_token_threshold", ("--dbo-prefill-token-threshold",), int,
         "DBO: steps with a prefill of more tokens are split (vLLM default 512)."),
    Flag("async_scheduling", ("--async-scheduling",), _bool,
         "Schedule step n + 1 while the GPU runs step n: host work overlaps the GPU's "
         "(kvplan follows vLLM 0.11: off; vLLM 0.14+ turns it on by default)."),
)
BY_FIELD = {f.field: f for f in FLAGS}
BY_NAME = {name: f for f in FLAGS for name in f.names}


def parse_flag(field: str, value: object) -> Any:
    """One flag's value as vLLM parses it (``8k`` for --max-model-len, ``24GiB`` for memory)."""
    flag = BY_FIELD[field]
    if field == "kv_cache_memory_bytes":
        from kvplan.units import parse_size

        return parse_size(str(value), flag.names[0])
    if isinstance(value, str):
        try:
            return flag.parse(value)
        except ValueError as exc:
            kind = _KINDS.get(flag.parse)
            why = f"expects {kind}, got {value!r}" if kind else str(exc)
            raise InputError(f"{flag.names[0]} {why}") from None
    return value


_KINDS: dict[Callable[[str], Any], str] = {int: "a whole number", float: "a number"}


def engine_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """The engine flags among ``values`` (a command's ``locals()``) that were given, parsed."""
    return {k: parse_flag(k, v) for k, v in values.items() if k in BY_FIELD and v is not None}
