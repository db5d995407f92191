"""SimulationResult -> Metrics with `vllm bench serve` definitions and keys, plus KV metrics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.errors import InputError
from kvplan.limits import SLO_LIMIT_MS
from kvplan.sim.result import SimulationResult

FloatArray = npt.NDArray[np.float64]

METRIC_NAMES = ("ttft", "tpot", "itl", "e2el")
DEFAULT_PERCENTILE_METRICS = ("ttft", "tpot", "itl")
"""vllm bench serve's default --percentile-metrics."""
DEFAULT_PERCENTILES = (99.0,)
"""vllm bench serve's default --metric-percentiles."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stat:
    """mean / median / std (population) / percentiles of one metric, in milliseconds."""

    mean_ms: float
    median_ms: float
    std_ms: float
    percentiles_ms: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    """Aggregates of one simulation (vLLM's BenchmarkMetrics, plus kvplan's KV metrics)."""

    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    request_goodput: float | None
    output_throughput: float
    total_token_throughput: float
    stats: dict[str, Stat]
    """Per metric in --percentile-metrics: 'ttft', 'tpot', 'itl', 'e2el'."""
    preemptions: int
    prefix_cache_hit_rate: float
    peak_kv_blocks: int
    num_blocks: int
    peak_kv_usage: float
    prefill_kv_share: float
    decode_kv_share: float
    num_steps: int
    max_concurrent_requests: int


def parse_goodput(items: Sequence[str]) -> dict[str, float]:
    """``["ttft:200", "tpot:50"]`` -> {"ttft": 200.0, ...} in ms (vllm bench --goodput)."""
    out: dict[str, float] = {}
    for item in items:
        for part in item.split():
            name, sep, value = part.partition(":")
            if not sep or name not in ("ttft", "tpot", "e2el"):
                raise InputError(f"--goodput {part!r}: use ttft:MS, tpot:MS or e2el:MS")
            try:
                out[name] = float(value)
            except ValueError:
                raise InputError(f"--goodput {part!r}: {value!r} is not a number of ms") from None
            high = SLO_LIMIT_MS[1]
            if not 0 <= out[name] <= high:  # vllm bench accepts 0 (nothing meets it)
                raise InputError(f"--goodput {part!r}: the SLO must be in [0, {high:,.0f}] ms "
                                 "(at most 24 hours)")
    return out


def parse_percentile_metrics(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in names if x not in METRIC_NAMES]
    if bad or not names:
        raise InputError(f"--percentile-metrics {text!r}: choose from {','.join(METRIC_NAMES)}")
    return names


def parse_percentiles(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"--metric-percentiles {text!r}: use numbers like 50,90,99") from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise InputError(f"--metric-percentiles {text!r}: each must be in [0, 100]")
    return values


def per_request(r: SimulationResult) -> dict[str, FloatArray]:
    """ttft, tpot, e2el per completed request in seconds (tpot NaN for 1-token outputs)."""
    done = r.finished
    sent = r.sent_s[done]
    ttft = r.first_token_s[done] - sent
    e2el = r.finish_s[done] - sent
    out = r.output_tokens[done]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / np.maximum(out - 1, 1), np.nan)
    return {"ttft": ttft, "tpot": tpot, "e2el": e2el}


def compute_metrics(
    r: SimulationResult,
    *,
    percentile_metrics: Sequence[str] = DEFAULT_PERCENTILE_METRICS,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    goodput_ms: dict[str, float] | None = None,
) -> Metrics:
    """Aggregate a simulation exactly as vLLM's ``calculate_metrics`` aggregates a benchmark."""
    done = r.finished
    req = per_request(r)
    values = {"ttft": req["ttft"], "tpot": req["tpot"][~np.isnan(req["tpot"])],
              "e2el": req["e2el"]}
    if "itl" in percentile_metrics:
        values["itl"] = itl_gaps(r)
    duration = _duration(r)
    n_in = int(r.prompt_tokens[done].sum())
    n_out = int(r.output_tokens[done].sum())
    claimed = r.prefill_claimed_blocks + r.decode_claimed_blocks
    return Metrics(
        completed=int(done.sum()), failed=len(r.rejected), duration_s=duration,
        total_input_tokens=n_in, total_output_tokens=n_out,
        request_throughput=_rate(int(done.sum()), duration),
        request_goodput=None if not goodput_ms else _goodput(req, goodput_ms, duration),
        output_throughput=_rate(n_out, duration),
        total_token_throughput=_rate(n_in + n_out, duration),
        stats={m: _stat(values[m], percentiles, scratch=m == "itl")
               for m in percentile_metrics},
        preemptions=r.total_preemptions,
        prefix_cache_hit_rate=_rate(int(r.prefix_hit_tokens.sum()), r.prefix_query_tokens),
        peak_kv_blocks=r.peak_kv_blocks, num_blocks=r.num_blocks,
        peak_kv_usage=_rate(r.peak_kv_blocks, r.usable_blocks),
        prefill_kv_share=_rate(r.prefill_claimed_blocks, claimed),
        decode_kv_share=_rate(r.decode_claimed_blocks, claimed),
        num_steps=r.num_steps,
        max_concurrent_requests=int(r.steps.running.max()) if r.num_steps else 0,
    )


def itl_gaps(r: SimulationResult) -> FloatArray:
    """r.itl_s(), the same values in the same order, built as one concatenation of step-gap
    slices: one array of the final size instead of five (azure-conv: 4M gaps, 32 MB each)."""
    order = np.lexsort((r.seg_first, r.seg_req))
    req, first, last = r.seg_req[order], r.seg_first[order], r.seg_last[order]
    ends = r.steps.end_s
    gaps = np.diff(ends)
    same = req[1:] == req[:-1]
    between = ends[first[1:][same]] - ends[last[:-1][same]]
    parts = [gaps[a:b] for a, b in zip(first.tolist(), last.tolist(), strict=True)]
    return np.concatenate([*parts, between]) if parts else np.zeros(0)


def _duration(r: SimulationResult) -> float:
    """From the benchmark start (t = 0) to the last answer (vLLM: benchmark_duration).

    vLLM starts the clock before ``get_request`` sleeps the first arrival gap and stops it
    when every request has answered; a rejected request answers (fails) when it is sent.
    """
    ends = [r.finish_s[r.finished], r.sent_s[np.array(sorted(r.rejected), dtype=np.int64)]]
    end = np.concatenate(ends)
    end = end[~np.isnan(end)]
    return float(end.max()) if len(end) else 0.0


def _rate(x: float, over: float) -> float:
    return x / over if over > 0 else 0.0


def _stat(x: FloatArray, percentiles: Sequence[float], *, scratch: bool = False) -> Stat:
    """vLLM: np.mean(x or 0) * 1000 etc.; an empty list counts as [0]. With ``scratch`` x is
    the caller's to lose (ITL: a fresh array of millions of gaps): the median and percentiles
    partition it in place instead of each partitioning a copy (same values, bit for bit)."""
    v = x if len(x) else np.zeros(1)
    mean, std = float(np.mean(v)) * 1000, float(np.std(v)) * 1000  # in x's order, first
    if scratch and len(x) and not np.isnan(v).any():
        median = _median_in_place(v)
        return Stat(mean_ms=mean, median_ms=median * 1000, std_ms=std, percentiles_ms=tuple(
            (float(p), float(np.percentile(v, p, overwrite_input=True)) * 1000)
            for p in percentiles))
    return Stat(
        mean_ms=mean, median_ms=float(np.median(v)) * 1000, std_ms=std,
        percentiles_ms=tuple((float(p), float(np.percentile(v, p)) * 1000) for p in percentiles),
    )


def _median_in_place(v: FloatArray) -> float:
    """np.median of a NaN-free array, partitioning v itself: the mean of its middle one or
    two order statistics, as np.median takes it."""
    half = len(v) // 2
    if len(v) % 2:
        v.partition(half)
        return float(np.mean(v[half:half + 1]))
    v.partition([half - 1, half])
    return float(np.mean(v[half - 1:half + 1]))


def _goodput(req: dict[str, FloatArray], slo_ms: dict[str, float], duration: float) -> float:
    """Requests meeting every SLO (metric <= SLO; tpot of a 1-token output counts as 0)."""
    good = np.ones(len(req["ttft"]), dtype=bool)
    for name, ms in slo_ms.items():
        v = np.nan_to_num(req[name], nan=0.0)
        good &= v <= ms / 1000
    return _rate(int(good.sum()), duration)


def p_word(p: float) -> str:
    """vLLM's percentile key word: 99 -> '99', 99.9 -> '99.9'."""
    return str(int(p)) if int(p) == p else str(p)


def vllm_result(m: Metrics) -> dict[str, Any]:
    """The aggregate keys `vllm bench serve --save-result` writes, in its order."""
    out: dict[str, Any] = {
        "duration": m.duration_s, "completed": m.completed, "failed": m.failed,
        "total_input_tokens": m.total_input_tokens,
        "total_output_tokens": m.total_output_tokens,
        "request_throughput": m.request_throughput, "request_goodput": m.request_goodput,
        "output_throughput": m.output_throughput,
        "total_token_throughput": m.total_token_throughput,
        "max_concurrent_requests": m.max_concurrent_requests,
    }
    for name, s in m.stats.items():
        out[f"mean_{name}_ms"] = s.mean_ms
        out[f"median_{name}_ms"] = s.median_ms
        out[f"std_{name}_ms"] = s.std_ms
        for p, v in s.percentiles_ms:
            out[f"p{p_word(p)}_{name}_ms"] = v
    return out


def kvplan_extras(m: Metrics) -> dict[str, Any]:
    """kvplan's own aggregates (not in vLLM's schema)."""
    return {
        "preemptions": m.preemptions, "prefix_cache_hit_rate": m.prefix_cache_hit_rate,
        "peak_kv_blocks": m.peak_kv_blocks, "num_blocks": m.num_blocks,
        "peak_kv_usage": m.peak_kv_usage, "prefill_kv_share": m.prefill_kv_share,
        "decode_kv_share": m.decode_kv_share, "num_steps": m.num_steps,
    }


def kv_usage_series(r: SimulationResult, max_points: int = 2000) -> dict[str, list[float]]:
    """The per-step KV series cut to at most ``max_points`` bins, keeping each bin's peak."""
    st = r.steps
    n = r.num_steps
    if n == 0:
        return {k: [] for k in ("time_s", "used_blocks", "logical_bytes", "running", "waiting")}
    edges = np.linspace(0, n, min(n, max_points) + 1).astype(np.int64)
    starts = edges[:-1]

    def peak(a: npt.NDArray[Any]) -> list[float]:
        return [float(x) for x in np.maximum.reduceat(a, starts)]

    return {"time_s": [float(x) for x in st.start_s[starts]], "used_blocks": peak(st.used_blocks),
            "logical_bytes": peak(st.logical_bytes), "running": peak(st.running),
            "waiting": peak(st.waiting)}


def save_result_json(r: SimulationResult, m: Metrics, header: dict[str, Any]) -> dict[str, Any]:
    """The whole --save-result object: header, vLLM keys, per-request lists, kvplan extras."""
    done = r.finished
    req = per_request(r)
    out = dict(header)
    out.update(vllm_result(m))
    out["input_lens"] = r.prompt_tokens[done].tolist()
    out["output_lens"] = r.output_tokens[done].tolist()
    out["ttfts"] = req["ttft"].tolist()
    out["itls"] = per_request_itls(r)
    out["errors"] = ["" for _ in range(int(done.sum()))] + list(r.rejected.values())
    out.update(kvplan_extras(m))
    out["kv_usage"] = kv_usage_series(r)
    out["rejected"] = rejected_list(r)
    return out


def rejected_list(r: SimulationResult) -> list[dict[str, Any]]:
    """The rejected requests by index, with vLLM's (or kvplan's) reason."""
    return [{"index": i, "reason": why} for i, why in sorted(r.rejected.items())]


def per_request_itls(r: SimulationResult) -> list[list[float]]:
    """Gaps between consecutive tokens of each completed request (vLLM's ``itls``), in order.

    One pass: every token time in request order, one diff, the gaps across two requests cut.
    """
    times = r.all_token_times()
    counts = np.fromiter((len(t) for t in times), dtype=np.int64, count=len(times))
    flat = np.concatenate(times) if times else np.zeros(0)
    gaps = np.diff(flat)
    ends = np.cumsum(counts)
    keep = np.ones(len(gaps), dtype=bool)
    keep[ends[(counts > 0) & (ends < len(flat))] - 1] = False  # last token -> next request
    per = np.split(gaps[keep], np.cumsum(np.maximum(counts - 1, 0))[:-1])
    return [per[i].tolist() for i in np.flatnonzero(r.finished).tolist()]
