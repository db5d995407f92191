"""vLLM's engine flags, declared once: the typer options every command shares, the parser of a
pasted ``vllm serve`` line, and one resolver from either to an ``EngineConfig``.

Each command names its parameters after ``EngineConfig`` fields and hands its ``locals()`` to
``engine_settings``; ``resolve_engine`` builds the config and applies vLLM's TP rule. ``plan``
(comma lists) reuses ``parse_flag`` per value and ``settings_grid`` for the product.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.engine import resolve_engine as resolve_engine  # re-exported
from kvplan.cli.fast.flag_table import BY_FIELD as BY_FIELD  # re-exported: the table
from kvplan.cli.fast.flag_table import BY_NAME as BY_NAME
from kvplan.cli.fast.flag_table import FLAGS as FLAGS
from kvplan.cli.fast.flag_table import Flag as Flag
from kvplan.cli.fast.flag_table import engine_settings as engine_settings
from kvplan.cli.fast.flag_table import human_readable_int as human_readable_int
from kvplan.cli.fast.flag_table import parse_flag as parse_flag
from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.specs.model import ModelSpec


def _opt(field: str) -> Any:
    flag = BY_FIELD[field]
    if flag.is_bool:
        long = flag.names[0]
        return typer.Option(f"{long}/--no-{long[2:]}", help=flag.help, show_default=False)
    return typer.Option(*flag.names, help=flag.help)


TpOpt = Annotated[int | None, _opt("tensor_parallel_size")]
PpOpt = Annotated[int | None, _opt("pipeline_parallel_size")]
DpOpt = Annotated[int | None, _opt("data_parallel_size")]
EpOpt = Annotated[bool | None, _opt("enable_expert_parallel")]
GpuUtilOpt = Annotated[float | None, _opt("gpu_memory_utilization")]
MaxLenOpt = Annotated[str | None, _opt("max_model_len")]
KvDtypeOpt = Annotated[str | None, _opt("kv_cache_dtype")]
DtypeOpt = Annotated[str | None, _opt("dtype")]
QuantOpt = Annotated[str | None, _opt("quantization")]
BlockOpt = Annotated[int | None, _opt("block_size")]
BatchedOpt = Annotated[str | None, _opt("max_num_batched_tokens")]
SeqsOpt = Annotated[int | None, _opt("max_num_seqs")]
KvMemOpt = Annotated[str | None, _opt("kv_cache_memory_bytes")]
BlocksOpt = Annotated[int | None, _opt("num_gpu_blocks_override")]
ChunkedOpt = Annotated[bool | None, _opt("enable_chunked_prefill")]
PrefixOpt = Annotated[bool | None, _opt("enable_prefix_caching")]
LongPrefillOpt = Annotated[int | None, _opt("long_prefill_token_threshold")]
PartialPrefillsOpt = Annotated[int | None, _opt("max_num_partial_prefills")]
MambaOpt = Annotated[str | None, _opt("mamba_cache_dtype")]
MambaSsmOpt = Annotated[str | None, _opt("mamba_ssm_cache_dtype")]
DboOpt = Annotated[bool | None, _opt("enable_dbo")]
DboDecodeOpt = Annotated[int | None, _opt("dbo_decode_token_threshold")]
DboPrefillOpt = Annotated[int | None, _opt("dbo_prefill_token_threshold")]
AsyncOpt = Annotated[bool | None, _opt("async_scheduling")]
A2aOpt = Annotated[str | None, typer.Option(
    "--all2all-backend", help="DP/EP token exchange: allgather_reducescatter (vLLM's default), "
    "deepep_high_throughput or deepep_low_latency (deepep: low latency).")]
ImbalanceOpt = Annotated[float | None, typer.Option(
    "--expert-imbalance", help="EP: busiest GPU's expert load over the mean (default 1.18, "
    "SGLang's measurement).")]
Mxfp4Opt = Annotated[str | None, typer.Option(
    "--mxfp4-moe-backend", help="gpt-oss's MXFP4 experts: auto (measured tables' kernel: "
    "Triton on Hopper) or marlin (vLLM < 0.12 on Hopper; VLLM_MXFP4_USE_MARLIN=1).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")]


def tp_allowed(model: ModelSpec, tp: int) -> bool:
    """Whether vLLM would start ``model`` at this TP degree."""
    from kvplan.specs.kv import check_tensor_parallel

    try:
        check_tensor_parallel(model, tp)
    except InputError:
        return False
    return True


def settings_grid(lists: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """Every combination of per-field value lists (``plan``'s comma lists), parsed."""
    fields = list(lists)
    for combo in itertools.product(*(lists[f] for f in fields)):
        yield {f: parse_flag(f, v) for f, v in zip(fields, combo, strict=True)}
