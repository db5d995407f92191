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
_START = {"Traffic request rate": "request_rate", "Burstiness factor": "burstiness",
          "Traffic ramp-up strategy": "ramp_up_strategy"}
"""The lines benchmark() prints before it sends (its arrival shape), outside the block."""
_RAMP = re.compile(r"Will increase RPS from (\S+) to (\S+) RPS")
_STAT = re.compile(r"(Mean|Median|P[0-9.]+) (TTFT|TPOT|ITL|E2EL) \(ms\)")
_LINE = re.compile(r"^\s*(.+?):\s+(\S+)(\s+\(.*\))?\s*$")
_NEEDED = ("Successful requests", "Total input tokens", "Total generated tokens")


def is_bench_text(text: str) -> bool:
    """Whether TEXT holds a pasted `vllm bench serve` summary."""
    return any(BANNER in line for line in text.splitlines())


def bench_text_rows(text: str, path: str) -> list[tuple[int, dict[str, Any]]]:
    """(banner line, result keys) of every summary block in TEXT: a block runs from its
    banner to the closing line of '=' (or the next banner). Of the lines before it only
    those benchmark() prints as it starts are read ("Traffic request rate: 8.0" in full
    precision, "Burstiness factor: 0.5 (...)", a ramp-up strategy); the rest (the server's
    log, the tqdm bar) are skipped. TraceError naming a block without a line the replay
    needs."""
    rows: list[tuple[int, dict[str, Any]]] = []
    block: dict[str, Any] | None = None
    before: dict[str, Any] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if BANNER in line:
            block, before = before, {}
            rows.append((n, block))
        elif block is not None and set(line.strip()) == {"="}:
            block = None
        elif block is None and (ramp := _RAMP.search(line)) is not None:
            before["ramp_up_start_rps"], before["ramp_up_end_rps"] = ramp.groups()
        elif (m := _LINE.match(line)) is None:
            continue
        elif block is not None and (key := _key(m.group(1).strip())) is not None:
            block.setdefault(key, m.group(2))  # a full-precision rate from before stays
        elif block is None and (key := _START.get(m.group(1).strip())) is not None:
            before[key] = m.group(2).rstrip(".")
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

    if "ramp_up_strategy" in row:  # refused by the serving reader, with its rates
        return
    if "request_rate" not in row:
        row["request_rate"] = "inf"
        note("%s: no 'Request rate configured (RPS)' line: replayed at --request-rate inf "
             "(every prompt sent at once), as vllm bench serve prints that line for a finite "
             "rate only (an older vLLM's may lack it: give such a run's --save-result "
             "JSON)", where)
    elif "burstiness" not in row and row["request_rate"] != "inf":
        note("%s: no 'Burstiness factor:' line (vllm bench serve prints it before the "
             "summary): replayed at --burstiness 1, Poisson arrivals", where)


def _sent(row: dict[str, Any], where: str) -> str:
    """Requests sent: completed + failed, as the printed counts give them."""
    try:
        return str(int(row["completed"]) + int(row.get("failed", "0")))
    except ValueError:
        raise TraceError(f"{where}: 'Successful requests' / 'Failed requests' must be whole "
                         f"numbers, got {row['completed']!r} / {row.get('failed')!r}") from None


_AVG = re.compile(r"^\s*Avg latency: (\S+) seconds\s*$")
"""vllm/benchmarks/latency.py's printed mean: ``print(f"Avg latency: {np.mean(latencies)}
seconds")``, full precision."""


def latency_text_avg(text: str, path: str) -> tuple[int, str] | None:
    """(line, seconds) of a pasted `vllm bench latency` output's "Avg latency:" line; None
    when TEXT has none. TraceError for more than one (each run has its own --batch,
    --prompt and --output, which the printed output does not say)."""
    found = [(n, m.group(1)) for n, line in enumerate(text.splitlines(), 1)
             if (m := _AVG.match(line))]
    if len(found) > 1:
        raise TraceError(f"{path}:{found[1][0]}: a second 'Avg latency:' line; give each "
                         "vllm bench latency run in its own file with its --batch, --prompt "
                         "and --output")
    return found[0] if found else None
