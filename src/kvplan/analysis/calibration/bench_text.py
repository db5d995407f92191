"""`vllm bench serve`'s printed summary (the "Serving Benchmark Result" block a terminal
shows, pasted into a file) -> the keys its --save-result JSON gives the same figures, one
mapping per block, for the serving reader (serving_runs.read_serving)."""

from __future__ import annotations

import re
from typing import Any

from kvplan.errors import TraceError

BANNER = "Serving Benchmark Result"
"""vllm/benchmarks/serve.py's benchmark(): the block's first line, centred in '='."""

_LABELS = {
    "Successful requests": "completed", "Failed requests": "failed",
    "Maximum request concurrency": "max_concurrency",
    "Request rate configured (RPS)": "request_rate",
    "Benchmark duration (s)": "duration", "Total input tokens": "total_input_tokens",
    "Total generated tokens": "total_output_tokens",
    "Request throughput (req/s)": "request_throughput",
    "Request goodput (req/s)": "request_goodput",
    "Output token throughput (tok/s)": "output_throughput",
    "Peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "Peak concurrent requests": "max_concurrent_requests",
    "Total Token throughput (tok/s)": "total_token_throughput",
    "Total token throughput (tok/s)": "total_token_throughput",
}
"""Each printed label (serve.py's print calls) -> its key in the result JSON."""
_STAT = re.compile(r"(Mean|Median|P[0-9.]+) (TTFT|TPOT|ITL|E2EL) \(ms\)")
_LINE = re.compile(r"^\s*(.+?):\s+(\S+)\s*$")
_NEEDED = ("Successful requests", "Total input tokens", "Total generated tokens")


def is_bench_text(text: str) -> bool:
    """Whether TEXT holds a pasted `vllm bench serve` summary."""
    return any(BANNER in line for line in text.splitlines())


def bench_text_rows(text: str, path: str) -> list[tuple[int, dict[str, Any]]]:
    """(banner line, result keys) of every summary block in TEXT: a block runs from its
    banner to the closing line of '=' (or the next banner); lines outside blocks (the
    server's log, the tqdm bar) are skipped. TraceError naming a block without a line the
    replay needs."""
    rows: list[tuple[int, dict[str, Any]]] = []
    block: dict[str, Any] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if BANNER in line:
            block = {}
            rows.append((n, block))
        elif block is not None and set(line.strip()) == {"="}:
            block = None
        elif block is not None and (m := _LINE.match(line)):
            key = _key(m.group(1).strip())
            if key is not None:
                block[key] = m.group(2)
    for n, row in rows:
        _check_block(row, f"{path}:{n}")
    return rows


def _key(label: str) -> str | None:
    """A printed label's result key (Mean TTFT (ms) -> mean_ttft_ms, P99.9 ITL (ms) ->
    p99.9_itl_ms), None for a line the replay does not read."""
    if label in _LABELS:
        return _LABELS[label]
    m = _STAT.fullmatch(label)
    if m is None:
        return None
    return f"{m.group(1).lower()}_{m.group(2).lower()}_ms"


def _check_block(row: dict[str, Any], where: str) -> None:
    """The lines a replay needs, and the arrival shape the summary does not print."""
    inverse = {v: k for k, v in _LABELS.items()}
    for label in _NEEDED:
        if _LABELS[label] not in row:
            raise TraceError(f"{where}: the pasted vllm bench serve summary has no "
                             f"'{label}:' line; paste the whole block or give its "
                             "--save-result JSON")
    if not any(k.startswith("mean_") for k in row) and "output_throughput" not in row:
        raise TraceError(f"{where}: the pasted vllm bench serve summary has no Mean TTFT, "
                         f"TPOT or ITL line and no '{inverse['output_throughput']}:' line")
    row["num_prompts"] = _sent(row, where)
    from kvplan.notes import note

    if "request_rate" not in row:
        row["request_rate"] = "inf"
        note("%s: no 'Request rate configured (RPS)' line: replayed at --request-rate inf "
             "(every prompt sent at once), as vllm bench serve prints that line for a finite "
             "rate only (an older vLLM's may lack it: give such a run's --save-result "
             "JSON)", where)
    else:
        note("%s: the printed summary does not say --burstiness: replayed at 1 (Poisson "
             "arrivals, vllm bench serve's default)", where)


def _sent(row: dict[str, Any], where: str) -> str:
    """Requests sent: completed + failed, as the printed counts give them."""
    try:
        return str(int(row["completed"]) + int(row.get("failed", "0")))
    except ValueError:
        raise TraceError(f"{where}: 'Successful requests' / 'Failed requests' must be whole "
                         f"numbers, got {row['completed']!r} / {row.get('failed')!r}") from None
