"""Request-trace loaders: bundled and user CSV traces -> Trace (arrivals, lengths, hashes)."""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from pathlib import Path

from kvplan.errors import TraceError, UnknownNameError
from kvplan.limits import MAX_TOKENS
from kvplan.specs.requests.trace_csv import ARRIVAL_UNITS, ArrivalUnit, Trace, TraceFormat

__all__ = ["BUNDLED_TRACES", "ArrivalUnit", "BundledTrace", "Trace", "TraceFormat",
           "bundled_trace", "bundled_trace_path", "load_csv_trace", "load_trace",
           "parse_trace_columns"]

_COLUMN_KEYS: tuple[str, ...] = ("arrival", "input", "output", "hashes")

@dataclass(frozen=True, slots=True, kw_only=True)
class BundledTrace:
    """A trace shipped in kvplan/data/traces, with where it came from."""

    name: str
    file: str
    format: TraceFormat
    source: str
    license: str
    default_num_prompts: int | None = None
    """Requests taken when --num-prompts is omitted: None = every row; vLLM's 1000 for the
    dataset `vllm bench serve` itself samples (`sharegpt`)."""


_AZURE = TraceFormat(
    arrival="TIMESTAMP", arrival_unit="datetime", input="ContextTokens", output="GeneratedTokens"
)
_MOONCAKE = TraceFormat(
    arrival="timestamp",
    arrival_unit="ms",
    input="input_length",
    output="output_length",
    hashes="hash_ids",
    hash_block_tokens=512,
)
_VIDUR = TraceFormat(input="num_prefill_tokens", output="num_decode_tokens")
_VIDUR_TIMED = TraceFormat(arrival="arrived_at", input="num_prefill_tokens",
                           output="num_decode_tokens")
"""Vidur's replay traces (its splitwise_{code,conv}.csv): arrived_at in seconds."""
_KNOWN = (_AZURE, _MOONCAKE, _VIDUR_TIMED, _VIDUR)  # recognised from a header, in this order
VLLM_DEFAULT_NUM_PROMPTS = 1000  # vllm bench serve's --num-prompts default
_AZURE_SRC = "Azure/AzurePublicDataset@b469a113 (Splitwise, ISCA'24)"
_MOONCAKE_SRC = "kvcache-ai/Mooncake@3b5a5941 FAST25-release/traces (JSONL -> CSV)"

BUNDLED_TRACES: dict[str, BundledTrace] = {
    t.name: t
    for t in (
        BundledTrace(
            name="azure-code",
            file="azure2023/AzureLLMInferenceTrace_code.csv",
            format=_AZURE,
            source=_AZURE_SRC,
            license="CC-BY-4.0",
        ),
        BundledTrace(
            name="azure-conv",
            file="azure2023/AzureLLMInferenceTrace_conv.csv",
            format=_AZURE,
            source=_AZURE_SRC,
            license="CC-BY-4.0",
        ),
        BundledTrace(
            name="mooncake-conversation",
            file="mooncake/conversation_trace.csv",
            format=_MOONCAKE,
            source=_MOONCAKE_SRC,
            license="Apache-2.0",
        ),
        BundledTrace(
            name="mooncake-synthetic",
            file="mooncake/synthetic_trace.csv",
            format=_MOONCAKE,
            source=_MOONCAKE_SRC,
            license="Apache-2.0",
        ),
        BundledTrace(
            name="sharegpt",
            file="sharegpt/sharegpt_v3_filtered.csv",
            format=_VIDUR,
            source="JonnyKong/vidur@941a76c3 data/processed_traces (vLLM's ShareGPT sampling)",
            license="MIT",
            default_num_prompts=VLLM_DEFAULT_NUM_PROMPTS,
        ),
        BundledTrace(
            name="sharegpt-multiturn",
            file="vidur/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
            format=_VIDUR,
            source="project-etalon/etalon@d5f18de1 data/processed_traces",
            license="Apache-2.0",
        ),
        BundledTrace(
            name="arxiv-summarization",
            file="vidur/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
            format=_VIDUR,
            source="microsoft/vidur@7d475133 data/processed_traces",
            license="MIT (vidur) / Apache-2.0 (etalon)",
        ),
        BundledTrace(
            name="bwb",
            file="vidur/bwb_stats_llama2_tokenizer_filtered_v2.csv",
            format=_VIDUR,
            source="project-etalon/etalon@d5f18de1 data/processed_traces",
            license="Apache-2.0",
        ),
    )
}


def bundled_trace(name: str) -> BundledTrace:
    """The bundled trace called NAME, or UnknownNameError listing the names there are."""
    try:
        return BUNDLED_TRACES[name]
    except KeyError:
        raise UnknownNameError(_unknown_trace_message(name)) from None


def _unknown_trace_message(name: str) -> str:
    names = sorted(BUNDLED_TRACES)
    close = difflib.get_close_matches(name.lower(), names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown trace '{name}': {hint}choose one of {', '.join(names)}"


def bundled_trace_path(name: str) -> Path:
    """Where the bundled trace NAME lies on disk."""
    # what importlib.resources.files gives for the package on disk, without importing it
    # (tempfile, shutil, random), as specs/catalog does
    root = Path(__file__).parent.parent.parent / "data" / "traces"
    return root / bundled_trace(name).file


@functools.cache
def load_trace(name: str) -> Trace:
    """Load a bundled trace by its dataset name (parsed once per process, arrays read-only)."""
    entry = bundled_trace(name)
    from kvplan.specs.requests.trace_cache import cached_csv_trace  # hashlib, zipfile: traces only

    return _noted(cached_csv_trace(bundled_trace_path(name), entry.format, name, _KNOWN))


def load_csv_trace(
    path: str | Path, columns: str | TraceFormat | None = None, *, name: str | None = None
) -> Trace:
    """Load any CSV trace; COLUMNS maps roles to the file's own column names.

    COLUMNS is ``"arrival=ts,input=prompt_len,output=gen_len"`` (``arrival`` and ``hashes``
    optional; options ``arrival_unit=s|ms|datetime`` and ``hash_block_tokens=N``), a
    TraceFormat, or None to recognise the Azure, Mooncake and Vidur layouts from the header.
    """
    path = Path(path)
    fmt = parse_trace_columns(columns) if isinstance(columns, str) else columns
    from kvplan.specs.requests.trace_cache import cached_csv_trace

    return _noted(cached_csv_trace(path, fmt, name or path.stem, _KNOWN))


def _noted(trace: Trace) -> Trace:
    """TRACE, after one note saying how many 0-output rows were left out, if any, and one
    saying how many rows were out of arrival order."""
    from kvplan.notes import note

    if trace.reordered_rows:
        note("%s: %d of its rows are not in arrival order; replayed sorted by arrival "
             "(rows with equal times keep the file's order)", trace.path, trace.reordered_rows)
    if trace.dropped_rows:
        note("%s: dropped the %d of its %d rows with 0 output tokens (failed requests; vLLM's "
             "BurstGPT loader drops them too); %d requests left", trace.path, trace.dropped_rows,
             trace.dropped_rows + len(trace), len(trace))
    return trace


def parse_trace_columns(spec: str) -> TraceFormat:
    """Parse ``--trace-columns`` (``role=column,...``) into a TraceFormat."""
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in spec.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise TraceError(
                f"--trace-columns item {item!r} is not role=column; "
                "write e.g. arrival=TIMESTAMP,input=ContextTokens,output=GeneratedTokens"
            )
        role = key.strip()
        if role in pairs:
            raise TraceError(f"--trace-columns gives {role}= twice ({pairs[role]!r} and "
                             f"{value.strip()!r}); give each role once")
        pairs[role] = value.strip()
    return _format_from_pairs(pairs)


def _format_from_pairs(pairs: dict[str, str]) -> TraceFormat:
    known = (*_COLUMN_KEYS, "arrival_unit", "hash_block_tokens")
    unknown = [k for k in pairs if k not in known]
    if unknown:
        raise TraceError(f"--trace-columns: unknown role '{unknown[0]}'; use {', '.join(known)}")
    for needed in ("input", "output"):
        if needed not in pairs:
            raise TraceError(f"--trace-columns needs {needed}=COLUMN (the {needed} token counts)")
    unit = pairs.get("arrival_unit", "s")
    if unit not in ARRIVAL_UNITS:
        raise TraceError(f"--trace-columns: arrival_unit must be s, ms or datetime, not {unit!r}")
    for option, column in (("arrival_unit", "arrival"), ("hash_block_tokens", "hashes")):
        if option in pairs and column not in pairs:
            raise TraceError(f"--trace-columns: {option} applies to the {column} column; "
                             f"add {column}=COLUMN or drop {option}")
    return TraceFormat(
        arrival=pairs.get("arrival"),
        arrival_unit=unit,  # type: ignore[arg-type]
        input=pairs["input"],
        output=pairs["output"],
        hashes=pairs.get("hashes"),
        hash_block_tokens=_block_tokens(pairs),
    )


def _block_tokens(pairs: dict[str, str]) -> int:
    default = "512" if "hashes" in pairs else "0"
    text = pairs.get("hash_block_tokens", default)
    hashed = "hashes" in pairs
    if not text.isdecimal() or (hashed and not 1 <= int(text) <= MAX_TOKENS):
        raise TraceError(f"--trace-columns: hash_block_tokens must be a whole number of "
                         f"tokens in [1, {MAX_TOKENS:,}], not {text[:40]!r}")
    return int(text) if hashed else 0
