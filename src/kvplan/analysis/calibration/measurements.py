"""Measured latency points: read CSV, simple JSON, kvplan's calibration JSON and vLLM's
benchmark JSON into typed ``Measurement`` values."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan import input_file, jsonread
from kvplan.analysis.calibration.measurement_checks import (
    check_measured,
    mapping_field,
    on_off,
    pick_name,
    whole,
    whole_count,
)
from kvplan.costs.step.latency import RequestShape
from kvplan.errors import KvplanError, TraceError, located
from kvplan.specs.serving import EngineConfig

METRICS = ("ttft_s", "tpot_s", "e2e_s", "output_throughput_tok_s")


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One measured static-batch shape on one deployment, and what was measured (seconds)."""

    id: str
    where: str
    """file:line it came from."""
    model: str
    gpu: str
    engine: EngineConfig
    shape: RequestShape
    measured: dict[str, float]
    """Metric name (one of METRICS) -> measured value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Defaults:
    """Fill-ins for measurement files that lack a field (vllm bench latency JSON has no shape)."""

    model: str | None = None
    gpu: str | None = None
    batch: int | None = None
    prompt: int | None = None
    output: int | None = None
    tensor_parallel_size: int = 1
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    async_scheduling: bool = False
    """vLLM --async-scheduling for points that do not say (their ``async_scheduling``)."""
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    """The server's scheduler limits for runs whose file does not record them (vLLM's
    save-result records none; None: vLLM's defaults)."""


ENGINE_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "dtype", "quantization",
               "kv_cache_dtype", "async_scheduling")
"""Engine flags a `vllm bench serve` result (or kvplan simulate's) may carry beside vLLM's
keys; each overrides its ``Defaults`` entry."""


def read_measurements(path: str | Path, defaults: Defaults | None = None) -> list[Measurement]:
    """Measured points from a CSV, a simple JSON, kvplan's calibration JSON, or the JSON of
    ``vllm bench serve --save-result`` / ``vllm bench latency --output-json``."""
    p, d = Path(path), defaults or Defaults()
    try:
        text = input_file.read_text(p, "utf-8-sig")
    except OSError as exc:
        raise TraceError(f"{p}: cannot read the file ({input_file.reason(exc)})") from None
    if p.suffix.lower() == ".csv":
        return _from_csv(text, str(p), d)
    try:
        data = jsonread.loads(text)
    except json.JSONDecodeError as exc:
        from kvplan.analysis.calibration.bench_text import latency_text_avg

        if (avg := latency_text_avg(text, str(p))) is not None:  # vllm bench latency, pasted
            return [_point({"e2e_s": avg[1]}, f"{p}:{avg[0]}", d)]
        if text.strip()[:1] not in ("{", "["):  # no JSON at all: say what is read
            raise TraceError(f"{p}:1: not a measurement file: give JSON, a .csv, or vllm "
                             "bench serve / latency output as printed (its 'Serving "
                             "Benchmark Result' block or 'Avg latency:' line)") from None
        raise TraceError(f"{p}:{exc.lineno}: not valid JSON (column {exc.colno}: {exc.msg})") \
            from None
    return _from_json(data, text, str(p), d)


def _from_json(data: Any, text: str, file: str, d: Defaults) -> list[Measurement]:
    if isinstance(data, Mapping) and "avg_latency" in data:
        return [_point({"e2e_s": data["avg_latency"]}, f"{file}:1", d)]
    if isinstance(data, Mapping) and "mean_ttft_ms" in data:
        return [_from_bench_serve(data, f"{file}:1", d)]
    rows = data.get("points") if isinstance(data, Mapping) else data
    if not isinstance(rows, list):
        raise TraceError(f"{file}:1: expected a list of points or an object with 'points'")
    if any(isinstance(r, Mapping) and "mean_ttft_ms" in r for r in rows):
        raise TraceError(f"{file}:1: a JSON array of vllm bench serve results; give each run "
                         "as a file of its own, or one object per line (--append-result)")
    out, lines = [], _Lines(text)
    for i, row in enumerate(rows):
        where = f"{file}:{lines.of(row, i)}"
        if not isinstance(row, Mapping):
            raise TraceError(f"{where}: point {i} is not an object")
        if "workload" in row:
            if str(mapping_field(row, "workload", where).get("mode", "")).startswith(
                    "static_batch"):
                out.append(_from_calibration_point(row, where, d))
        else:
            out.append(_point(row, where, d, str(row.get("id", where))))
    return out


class _Lines:
    """Best-effort line of each point in its JSON file (its id's line), for error messages,
    searched on from the point before (points come in file order): a search from the top and
    a newline count per point was quadratic (20,000 points: 42 s to read)."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.line = text, 0, 1

    def of(self, row: Any, index: int) -> int:
        ident = row.get("id") if isinstance(row, Mapping) else None
        if ident is None:
            return index + 1
        key = json.dumps(ident)
        at = self.text.find(key, self.pos)
        if at < 0:  # not after the point before: its first place, as a lone search finds
            at = self.text.find(key)
            return index + 1 if at < 0 else self.text.count("\n", 0, at) + 1
        self.line += self.text.count("\n", self.pos, at)
        self.pos = at
        return self.line


def _from_csv(text: str, file: str, d: Defaults) -> list[Measurement]:
    reader = csv.DictReader(text.splitlines())
    try:
        if (twice := input_file.repeated_column(reader.fieldnames)) is not None:
            raise TraceError(f"{file}:1: the header names column '{twice}' twice; keep one")
        return _csv_points(reader, file, d)
    except csv.Error as exc:  # a field over csv's 131,072-character limit
        raise TraceError(f"{file}:{reader.line_num + 1}: not a readable CSV row ({exc})") \
            from None


def _csv_points(reader: csv.DictReader[str], file: str, d: Defaults) -> list[Measurement]:
    out = []
    for row in reader:
        where = f"{file}:{reader.line_num}"
        if None in row or any(v is None for v in row.values()):
            width = len(reader.fieldnames or [])
            raise TraceError(f"{where}: wrong number of columns (the header has {width})")
        clean = {k.strip(): v.strip() for k, v in row.items() if v is not None and v.strip()}
        out.append(_point(clean, where, d, clean.get("id", where)))
    if not out:
        raise TraceError(f"{file}:1: no measurement rows (need a header and at least one row)")
    return out


_MS_FIELDS = {"ttft_ms": "ttft_s", "tpot_ms": "tpot_s", "e2e_ms": "e2e_s"}
_S_FIELDS = {"ttft_s": "ttft_s", "tpot_s": "tpot_s", "e2e_s": "e2e_s",
             "output_throughput_tok_s": "output_throughput_tok_s",
             "output_throughput": "output_throughput_tok_s"}


def _point(row: Mapping[str, Any], where: str, d: Defaults, ident: str = "") -> Measurement:
    """A simple point: model, gpu, batch, prompt, output + any of the metric columns; its id
    is the row's own or, unnamed, where it was read (file:line: unique across files)."""
    measured = {m: _num(row[k], k, where) / 1000 for k, m in _MS_FIELDS.items() if k in row}
    measured |= {m: _num(row[k], k, where) for k, m in _S_FIELDS.items() if k in row}
    if not measured:
        raise TraceError(f"{where}: no measured value; give ttft_ms, tpot_ms, e2e_ms or "
                         "output_throughput_tok_s")
    check_measured(measured, where)
    shape = _shape(row.get("batch", d.batch), row.get("prompt", d.prompt),
                   row.get("output", d.output), where)
    _check_tpot(row, shape, where)
    engine = _engine(row, where, d)
    model = _need(pick_name(row.get("model"), d.model, "model", where), "model", where)
    gpu = _need(pick_name(row.get("gpu"), d.gpu, "gpu", where), "gpu", where)
    return Measurement(id=ident or where, where=where, model=model, gpu=gpu, engine=engine,
                       shape=shape, measured=measured)


def _check_tpot(row: Mapping[str, Any], shape: RequestShape, where: str) -> None:
    """One output token has no time per output token (vLLM's TPOT leaves such requests out
    and writes 0): a TPOT given for it was compared with the predicted TTFT."""
    key = next((k for k in ("tpot_ms", "tpot_s") if k in row), None)
    if key is not None and shape.output_tokens < 2:
        raise TraceError(f"{where}: '{key}' needs an output of at least 2 tokens (this point "
                         f"has {shape.output_tokens}: no time between output tokens); drop "
                         "the value or fix the output length")


def _from_bench_serve(data: Mapping[str, Any], where: str, d: Defaults) -> Measurement:
    """``vllm bench serve --save-result``: mean TTFT/TPOT and output throughput; the batch is
    max_concurrency (else every prompt at once), lengths are the per-request means."""
    done = whole_count(_num(data.get("completed") or data.get("num_prompts"), "completed",
                            where), "completed", where)
    batch = data.get("max_concurrency") or done
    for key in ("mean_ttft_ms", "mean_tpot_ms", "output_throughput"):  # named as in the file
        if key == "mean_ttft_ms" or data.get(key) not in (None, 0):
            _num(data.get(key), key, where)
    for key in ("total_input_tokens", "total_output_tokens"):  # there is no such option
        if data.get(key) in (None, ""):
            raise TraceError(f"{where}: missing '{key}' (vllm bench serve --save-result writes "
                             "it; a CSV sweep row gives num_prompts, input_len and output_len "
                             "instead of completed)")
    prompt = round(_num(data.get("total_input_tokens"), "total_input_tokens", where) / done)
    output = round(_num(data.get("total_output_tokens"), "total_output_tokens", where) / done)
    row = {"model": data.get("model_id"), "gpu": data.get("gpu"), "batch": batch,
           "prompt": prompt, "output": output, "ttft_ms": data["mean_ttft_ms"],
           "output_throughput_tok_s": data.get("output_throughput")}
    if data.get("mean_tpot_ms") and output >= 2:  # a mean under 1.5 tokens rounds to 1
        row["tpot_ms"] = data["mean_tpot_ms"]
    for key in ENGINE_KEYS:
        if data.get(key) is not None:
            row[key] = data[key]
    return _point({k: v for k, v in row.items() if v is not None}, where, d)


def _from_calibration_point(row: Mapping[str, Any], where: str, d: Defaults) -> Measurement:
    """A point of kvplan's bundled latency_calibration.json (TensorRT-LLM tables)."""
    w, m = mapping_field(row, "workload", where), mapping_field(row, "metrics", where)
    args = mapping_field(row, "engine_args", where)
    precision = str(row.get("precision", "")).upper()
    fp8 = "FP8" in precision
    simple = {
        "model": row.get("model_config"), "gpu": row.get("gpu"),
        "batch": w.get("batch_size"), "prompt": w.get("input_len"), "output": w.get("output_len"),
        "tensor_parallel_size": row.get("tp", 1), "pipeline_parallel_size": row.get("pp", 1),
        "dtype": "float16" if "FP16" in precision else "auto",
        "quantization": "fp8" if fp8 else None, "kv_cache_dtype": "fp8" if fp8 else "auto",
        "async_scheduling": args.get("async_scheduling"),
    }
    if "ttft_ms" in m:
        simple["ttft_ms"] = m["ttft_ms"]
    if "output_throughput" in m:
        simple["output_throughput_tok_s"] = m["output_throughput"]
    clean = {k: v for k, v in simple.items() if v is not None}
    return _point(clean, where, d, str(row.get("id", where)))


def _engine(row: Mapping[str, Any], where: str, d: Defaults) -> EngineConfig:
    try:
        return EngineConfig(
            tensor_parallel_size=whole(row.get("tensor_parallel_size", d.tensor_parallel_size),
                                       "tensor_parallel_size"),
            pipeline_parallel_size=whole(row.get("pipeline_parallel_size", 1),
                                         "pipeline_parallel_size"),
            dtype=str(row.get("dtype", d.dtype)),
            quantization=row.get("quantization", d.quantization) or None,
            kv_cache_dtype=str(row.get("kv_cache_dtype", d.kv_cache_dtype)),
            max_num_batched_tokens=whole(row["max_num_batched_tokens"], "max_num_batched_tokens")
            if row.get("max_num_batched_tokens") else d.max_num_batched_tokens,
            async_scheduling=on_off(row.get("async_scheduling", d.async_scheduling),
                                    "async_scheduling"),
        )
    except (ValueError, TypeError, OverflowError, KvplanError) as exc:
        raise TraceError(located(where, exc)) from None


def _shape(batch: Any, prompt: Any, output: Any, where: str) -> RequestShape:
    try:
        return RequestShape(batch=int(_num(batch, "batch", where)),
                            prompt_tokens=int(_num(prompt, "prompt", where)),
                            output_tokens=int(_num(output, "output", where)))
    except KvplanError as exc:
        raise TraceError(f"{where}: {str(exc).removeprefix(where + ': ')}") from None


def _num(value: Any, name: str, where: str) -> float:
    if value is None:
        raise TraceError(f"{where}: missing '{name}' (give it in the file or as an option)")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise TraceError(f"{where}: '{name}' must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise TraceError(f"{where}: '{name}' must be positive, got {value!r}")
    return number


def _need(value: Any, name: str, where: str) -> str:
    if not value:
        raise TraceError(f"{where}: missing '{name}' (give it in the file or as --{name})")
    return str(value)
