"""Serving runs for `kvplan calibrate`: read `vllm bench serve --save-result` JSON (and
kvplan simulate's, which adds the engine flags vLLM's file lacks) and CSV sweeps with one run
per row into ``ServingRun`` values, refusing runs the replay cannot reproduce (a trace, a
ramp-up of the request rate, a data-parallel or disaggregated fleet)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kvplan import input_file, jsonread
from kvplan.analysis.calibration.bench_text import bench_text_rows, is_bench_text
from kvplan.analysis.calibration.measurement_checks import on_off, pick_name
from kvplan.analysis.calibration.measurements import ENGINE_KEYS, Defaults
from kvplan.errors import KvplanError, TraceError, located
from kvplan.limits import MAX_PROMPTS, MAX_TOKENS, bounded_repr
from kvplan.specs.requests.bounds import MAX_SEED
from kvplan.specs.serving import EngineConfig

SERVING_METRICS = {"mean_ttft_ms": ("ttft_s", 1e-3), "mean_tpot_ms": ("tpot_s", 1e-3),
                   "mean_itl_ms": ("itl_s", 1e-3),
                   "output_throughput": ("output_throughput_tok_s", 1.0)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRun:
    """One measured serving run: deployment, workload, measured means (SI units)."""

    id: str
    where: str
    model: str
    gpu: str
    engine: EngineConfig
    num_prompts: int
    input_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    request_rate: float | None
    """None = inf (every prompt at t = 0)."""
    burstiness: float
    max_concurrency: int | None
    measured: dict[str, float]
    failed_at: tuple[int, ...] = ()
    """Send positions of the run's failed requests (vLLM's ``errors`` list; without it, the
    ``failed`` count spread evenly): its arrival times were drawn for every request sent,
    failed ones included."""
    seed: int = 0
    """The run's --seed (kvplan simulate's file; vLLM's has none: its default, 0)."""


def is_serving_file(path: str | Path) -> bool:
    """A `vllm bench serve` result JSON, or a CSV with a concurrency / rate column."""
    p = Path(path)
    try:
        text = input_file.read_text(p, "utf-8-sig")
    except OSError:
        return False  # read_measurements then says why
    if p.suffix.lower() == ".csv":
        header = text.splitlines()[0] if text else ""
        cols = {c.strip() for c in header.split(",")}
        return bool(cols & {"max_concurrency", "request_rate"})
    try:
        objects = json_objects(text)
    except json.JSONDecodeError:
        return is_bench_text(text)  # the printed summary, pasted
    return all(isinstance(o, Mapping) and "mean_ttft_ms" in o for _, o in objects)


def json_objects(text: str) -> list[tuple[int, Any]]:
    """(line, value) of a JSON file, or of each line of a JSON-lines file: `vllm bench serve
    --append-result` adds each run's object on a line of its own. JSONDecodeError (the whole
    text's) when it is neither."""
    try:
        return [(1, jsonread.loads(text))]
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        try:
            objects = [(n, jsonread.loads(line)) for n, line in lines]
        except json.JSONDecodeError:
            raise whole from None
        if len(objects) < 2 or not all(isinstance(o, Mapping) for _, o in objects):
            raise whole from None
        return objects


def read_serving(path: str | Path, d: Defaults) -> list[ServingRun]:
    p = Path(path)
    try:
        text = input_file.read_text(p, "utf-8-sig")
    except OSError as exc:
        raise TraceError(f"{p}: cannot read the file ({input_file.reason(exc)})") from None
    if p.suffix.lower() != ".csv":
        try:
            objects = json_objects(text)
        except json.JSONDecodeError as exc:
            if not is_bench_text(text):
                raise TraceError(f"{p}:{exc.lineno}: not valid JSON ({exc.msg})") from None
            objects = bench_text_rows(text, str(p))
        if len(objects) == 1:  # its line: 1 for JSON, the banner's for a pasted summary
            return [_run(objects[0][1], f"{p}:{objects[0][0]}", d, p.name)]
        return [_run(o, f"{p}:{n}", d, f"{p.name}:{n}") for n, o in objects]
    reader = csv.DictReader(text.splitlines())
    try:
        if (twice := input_file.repeated_column(reader.fieldnames)) is not None:
            raise TraceError(f"{p}:1: the header names column '{twice}' twice; keep one")
        runs = []
        for row in reader:
            where = f"{p}:{reader.line_num}"
            if None in row or any(v is None for v in row.values()):  # a comma too many or few
                raise TraceError(f"{where}: wrong number of columns (the header has "
                                 f"{len(reader.fieldnames or [])})")
            runs.append(_run({k.strip(): v.strip() for k, v in row.items() if k and v.strip()},
                             where, d, f"{p.name}:{reader.line_num}"))
        return runs
    except csv.Error as exc:  # a field over csv's 131,072-character limit
        raise TraceError(f"{p}:{reader.line_num + 1}: not a readable CSV row ({exc})") \
            from None


def _num(row: Mapping[str, Any], key: str, where: str, default: Any = None) -> float:
    value = row.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TraceError(f"{where}: '{key}' must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise TraceError(f"{where}: '{key}' must be positive, got {value!r}")
    return number


def failed_positions(row: Mapping[str, Any], n: int, where: str = "") -> tuple[int, ...]:
    """Send positions of the failed requests where vLLM lists every request (``errors``:
    "" for a completed one) and N of them completed; else, for a file without the list
    (saved without --save-detailed), the ``failed`` count spread evenly over the sends."""
    errs = row.get("errors")
    if isinstance(errs, list) and sum(1 for e in errs if not e) == n:
        return tuple(i for i, e in enumerate(errs) if e)
    failed = _failed_count(row, where, n)
    if not failed:
        return ()
    sent = n + failed
    if str(row.get("request_rate", "inf")) not in ("inf", "trace"):
        from kvplan.notes import note

        note("%s: %d of the %d requests sent failed and the file has no per-request 'errors' "
             "list (saved without --save-detailed): the arrival gaps are drawn for all %d, as "
             "vllm bench serve drew them, but which ones failed and their lengths are "
             "unknown, so the replay leaves out %d send times spread evenly over the run",
             where, failed, sent, sent, failed)
    return tuple(int(i) for i in (np.arange(failed) * 2 + 1) * sent // (2 * failed))


def _failed_count(row: Mapping[str, Any], where: str, n: int) -> int:
    """Requests sent that failed: the file's ``failed``, else num_prompts - completed."""
    if row.get("failed") not in (None, ""):
        return _count(row, "failed", where)
    if row.get("num_prompts") in (None, ""):
        return 0
    return max(0, _count(row, "num_prompts", where) - n)


def _completed(row: Mapping[str, Any], where: str) -> int:
    """Requests the run completed (a CSV sweep's num_prompts), checked before the per-request
    lengths are made: 'num_prompts' 1e9 built two 10^9-item tuples (8 GB) first."""
    key = "completed" if row.get("completed") not in (None, "") else "num_prompts"
    n = _count(row, key, where)
    if n < 1:
        raise TraceError(f"{where}: '{key}' must be positive, got {row.get(key)!r}")
    return n


def _count(row: Mapping[str, Any], key: str, where: str) -> int:
    value: Any = row.get(key)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not (math.isfinite(number) and number == int(number) and 0 <= number <= MAX_PROMPTS):
        raise TraceError(f"{where}: '{key}' must be a whole number of requests in "
                         f"[0, {MAX_PROMPTS:,}], got {value!r}")
    return int(number)


def _lens(row: Mapping[str, Any], where: str, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ins, outs, errs = row.get("input_lens"), row.get("output_lens"), row.get("errors")
    if (isinstance(ins, list) and isinstance(outs, list) and isinstance(errs, list)
            and len(ins) == len(outs) == len(errs) != n):  # vLLM lists failed requests too
        ok = [i for i, e in enumerate(errs) if not e]
        ins, outs = [ins[i] for i in ok], [outs[i] for i in ok]
    if isinstance(ins, list) and isinstance(outs, list) and len(ins) == len(outs) == n:
        return (_tokens(ins, "input_lens", where, 1),
                tuple(max(1, x) for x in _tokens(outs, "output_lens", where, 0)))
    if "total_input_tokens" in row:
        i = round(_num(row, "total_input_tokens", where) / n)
        o = round(_num(row, "total_output_tokens", where) / n)
    else:
        i, o = round(_num(row, "input_len", where)), round(_num(row, "output_len", where))
    return (max(1, i),) * n, (max(1, o),) * n


def _tokens(values: list[Any], key: str, where: str, least: int) -> tuple[int, ...]:
    """A per-request length list as whole token counts in [least, MAX_TOKENS]: 'x', None,
    [1] or 1e30 raised a traceback, 1.5 was cut to 1 and -5 (an output) read as 1."""
    out = []
    for i, v in enumerate(values):
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) \
            and v == int(v) and least <= v <= MAX_TOKENS
        if not ok:
            raise TraceError(f"{where}: '{key}' item {i} must be a whole number of tokens in "
                             f"[{least}, {MAX_TOKENS:,}], got {bounded_repr(v)}")
        out.append(int(v))
    return tuple(out)


def _validate(row: Mapping[str, Any], where: str, d: Defaults) -> None:
    """The static reader's checks on the same fields (whole counts, lengths within the
    model's context, sane ranges): the same one-line errors for a bad file."""
    from kvplan.analysis.calibration import measurements as ms

    given = row.get("max_concurrency") not in (None, "", "None")  # named, not as 'batch'
    if given and _num(row, "max_concurrency", where) % 1:
        raise TraceError(f"{where}: 'max_concurrency' must be a whole number of requests, "
                         f"got {row['max_concurrency']!r}")
    for key in ("input_len", "output_len", *SERVING_METRICS):  # by the file's own names
        if row.get(key) not in (None, "", 0, 0.0):
            _num(row, key, where)
    if "mean_ttft_ms" in row and ("completed" in row or "total_input_tokens" in row):
        _check(ms._from_bench_serve(row, where, d))  # vLLM's keys (a CSV sweep has lengths)
        return
    simple = {"model": row.get("model_id") or row.get("model"), "gpu": row.get("gpu"),
              "batch": row.get("max_concurrency") or row.get("num_prompts"),
              "prompt": row.get("input_len"), "output": row.get("output_len"),
              "ttft_ms": row.get("mean_ttft_ms") or row.get("mean_tpot_ms") or 1}
    for key in ENGINE_KEYS:
        if row.get(key) not in (None, ""):
            simple[key] = row[key]
    _check(ms._point({k: v for k, v in simple.items() if v not in (None, "")}, where, d, "run"))


def _check(m: Any) -> None:
    """kvplan latency's rules for the deployment and one request (context, TP, stages)."""
    from kvplan.analysis.calibration.measurement_checks import check_point
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    try:
        check_point(load_model(m.model), load_gpu(m.gpu), m.engine, m.shape)
    except KvplanError as exc:
        raise TraceError(located(m.where, exc)) from None


def _run(row: Mapping[str, Any], where: str, d: Defaults, name: str) -> ServingRun:
    """One run; ``name`` is its id unless the row has one (a CSV row: file:line)."""
    _validate(row, where, d)
    n = _completed(row, where)
    ins, outs = _lens(row, where, n)
    _check_replayable(row, where)
    rate, burstiness = _arrival_shape(row, where)
    conc = row.get("max_concurrency")
    measured = {m: _num(row, k, where) * f for k, (m, f) in SERVING_METRICS.items()
                if row.get(k) not in (None, "", 0, 0.0)}
    if not measured:
        raise TraceError(f"{where}: no measured mean_ttft_ms, mean_tpot_ms, mean_itl_ms or "
                         "output_throughput")
    model = pick_name(row.get("model_id") or row.get("model"), d.model, "model", where)
    gpu = pick_name(row.get("gpu"), d.gpu, "gpu", where)
    if not model or not gpu:
        raise TraceError(f"{where}: missing '{'model' if not model else 'gpu'}' (give it in "
                         "the file or as --model / --gpu)")
    return ServingRun(
        id=str(row.get("id") or name), where=where,
        model=str(model), gpu=str(gpu), engine=_engine(row, where, d), num_prompts=n,
        input_lens=ins, output_lens=outs,
        request_rate=rate, burstiness=burstiness,
        max_concurrency=None if conc in (None, "", "None") else int(_num(row, "max_concurrency",
                                                                          where)),
        measured=measured, failed_at=failed_positions(row, n, where), seed=_seed(row, where))


def _arrival_shape(row: Mapping[str, Any], where: str) -> tuple[float | None, float]:
    """(request_rate or None for inf, burstiness) within the ranges the flags take: a hand-
    edited burstiness of 0 read as 1, 'x' or [1] raised a traceback, and a rate of 1e-300
    req/s spread the sends past the simulator's clock."""
    from kvplan.limits import MAX_REQUEST_RATE, MIN_REQUEST_RATE
    from kvplan.specs.requests.bounds import BURSTINESS_RANGE

    rate = None
    if str(row.get("request_rate", "inf")) != "inf":
        rate = _within(row, "request_rate", where, (MIN_REQUEST_RATE, MAX_REQUEST_RATE))
    burstiness = 1.0
    if row.get("burstiness") not in (None, ""):  # vllm bench serve writes 1.0 by default
        burstiness = _within(row, "burstiness", where, BURSTINESS_RANGE)
    return rate, burstiness


def _within(row: Mapping[str, Any], key: str, where: str, span: tuple[float, float]) -> float:
    number = _num(row, key, where)
    if not span[0] <= number <= span[1]:
        raise TraceError(f"{where}: '{key}' must be in [{span[0]:g}, {span[1]:g}], "
                         f"got {row.get(key)!r}")
    return number


def _seed(row: Mapping[str, Any], where: str) -> int:
    """The run's --seed: kvplan simulate writes it (vLLM's file only where --metadata
    seed=N adds it); else vllm bench serve's default, 0, with a note for a rated run, whose
    arrival times the seed draws."""
    value = row.get("seed")
    if value in (None, ""):
        if str(row.get("request_rate", "inf")) not in ("inf", "trace"):
            from kvplan.notes import note

            note("%s: the file records no seed (vllm bench serve writes none; its --metadata "
                 "seed=N adds one): a run at a finite request_rate is replayed on the arrivals "
                 "--seed 0 draws, and one with another --seed sent at other times",
                 where.rpartition(":")[0] or where)  # one note a file, not one a CSV row
        return 0
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not (math.isfinite(number) and number == int(number) and 0 <= number <= MAX_SEED):
        raise TraceError(f"{where}: 'seed' must be a whole number in [0, {MAX_SEED}], "
                         f"got {value!r}")
    return int(number)


def _check_replayable(row: Mapping[str, Any], where: str) -> None:
    """TraceError for a run whose sends or engines the replay cannot reproduce."""
    if str(row.get("request_rate", "inf")) == "trace":
        raise TraceError(f"{where}: request_rate 'trace': a trace replayed on its own arrival "
                         "times, which the file does not hold; calibrate on runs with a request "
                         "rate or --max-concurrency (kvplan simulate --request-rate R)")
    if row.get("ramp_up_strategy") not in (None, ""):
        raise TraceError(f"{where}: a --ramp-up-strategy run (its request rate climbs from "
                         f"{row.get('ramp_up_start_rps')} to {row.get('ramp_up_end_rps')} req/s; "
                         "the file's request_rate 'inf' is not when requests were sent); "
                         "calibrate on runs with a fixed --request-rate or --max-concurrency")
    if "disagg" in row or str(row.get("data_parallel_size", 1)) not in ("1", "1.0"):
        raise TraceError(f"{where}: a data-parallel or disaggregated run; kvplan calibrate "
                         "replays one engine: calibrate on runs of one engine (-dp 1)")


def _engine(row: Mapping[str, Any], where: str, d: Defaults) -> EngineConfig:
    def opt(key: str) -> int | None:  # the file's, else the flag's (vLLM's file has none)
        return int(_num(row, key, where)) if row.get(key) not in (None, "") else \
            getattr(d, key)

    try:
        return EngineConfig(
            tensor_parallel_size=int(row.get("tensor_parallel_size", d.tensor_parallel_size)),
            pipeline_parallel_size=int(row.get("pipeline_parallel_size", 1)),
            dtype=str(row.get("dtype", d.dtype)), kv_cache_dtype=str(row.get(
                "kv_cache_dtype", d.kv_cache_dtype)),
            quantization=row.get("quantization", d.quantization) or None,
            max_num_batched_tokens=opt("max_num_batched_tokens"),
            max_num_seqs=opt("max_num_seqs"), max_model_len=opt("max_model_len"),
            async_scheduling=on_off(row.get("async_scheduling", d.async_scheduling),
                                    "async_scheduling"))
    except (ValueError, TypeError, KvplanError) as exc:
        raise TraceError(located(where, exc)) from None
