"""SimulationResult -> Metrics with `vllm bench serve` definitions and keys, plus KV metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.analysis.itl_rows import itl_rows
from kvplan.analysis.metric_args import METRIC_NAMES as METRIC_NAMES  # re-exported
from kvplan.analysis.metric_args import check_metric_args
from kvplan.analysis.metric_args import parse_goodput as parse_goodput
from kvplan.analysis.metric_args import parse_percentile_metrics as parse_percentile_metrics
from kvplan.analysis.metric_args import parse_percentiles as parse_percentiles
from kvplan.analysis.weighted import sorted_percentile, summarize
from kvplan.sim.result import IntArray, SimulationResult

FloatArray = npt.NDArray[np.float64]

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
    """Per metric in --percentile-metrics, in vLLM's order: 'ttft', 'tpot', 'itl', 'e2el'."""
    preemptions: int
    prefix_cache_hit_rate: float
    peak_kv_blocks: int
    num_blocks: int
    """vLLM's num_gpu_blocks (a DP fleet: summed over its ranks, one null block each)."""
    usable_blocks: int
    """``num_blocks`` less the null blocks: what requests can hold."""
    peak_kv_usage: float
    prefill_kv_share: float
    decode_kv_share: float
    num_steps: int
    max_output_tokens_per_s: float
    """vLLM's peak: the most output tokens in one whole second since the first send."""
    max_concurrent_requests: int
    """vLLM's peak: the most completed requests in flight (sent, not answered) in one
    one-second bucket since the first send, not at one instant (``in_flight_peak``)."""


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
    """Aggregate a simulation exactly as vLLM's ``calculate_metrics`` aggregates a benchmark.

    ``percentile_metrics`` from ttft, tpot, itl, e2el; ``percentiles`` each in [0, 100];
    ``goodput_ms``: SLOs in ms for ttft, tpot, e2el (InputError naming a bad one)."""
    check_metric_args(percentile_metrics, percentiles, goodput_ms)
    done = r.finished
    req = per_request(r)
    values = {"ttft": req["ttft"], "tpot": req["tpot"][~np.isnan(req["tpot"])],
              "e2el": req["e2el"]}
    duration = benchmark_duration(r)
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
        stats={m: itl_stat(r, percentiles) if m == "itl" else _stat(values[m], percentiles)
               for m in METRIC_NAMES if m in percentile_metrics},  # vLLM's order, any given
        preemptions=r.total_preemptions,
        prefix_cache_hit_rate=_rate(r.prefix_lookup_hits, r.prefix_query_tokens),
        peak_kv_blocks=r.peak_kv_blocks, num_blocks=r.num_blocks,
        usable_blocks=r.usable_blocks, peak_kv_usage=_rate(r.peak_kv_blocks, r.usable_blocks),
        prefill_kv_share=_rate(r.prefill_claimed_blocks, claimed),
        decode_kv_share=_rate(r.decode_claimed_blocks, claimed),
        num_steps=r.num_steps, max_output_tokens_per_s=peak_output_tokens_per_s(r),
        max_concurrent_requests=in_flight_peak(r),
    )


def in_flight_peak(r: SimulationResult) -> int:
    """vLLM's ``max_concurrent_requests`` (``calculate_metrics``): one-second buckets
    ``int(t - first send)``; a completed request counts in every bucket from its send's to
    its answer's, both included; the fullest bucket. So requests in flight in the same second
    count together even if never at once (three 0.1 s requests sent at 0, 0.3 and 0.6 s: 3).
    Requests waiting in the server count (not only its running set). Only the buckets where
    the count changes are looked at (a span-long array is 8 bytes per simulated second)."""
    done = r.finished
    starts, ends = r.sent_s[done], r.finish_s[done]
    if len(starts) == 0:
        return 0
    first = float(starts.min())
    opens = np.floor(starts - first)  # int() truncation, kept in float
    closes = np.floor(ends - first) + 1.0  # the bucket after the answer's
    buckets, which = np.unique(np.concatenate([opens, closes]), return_inverse=True)
    delta = np.concatenate([np.ones(len(opens)), -np.ones(len(closes))])
    change = np.bincount(which, weights=delta, minlength=len(buckets))
    return int(np.cumsum(change).max())


def peak_output_tokens_per_s(r: SimulationResult) -> float:
    """vLLM's ``max_output_tokens_per_s`` (``calculate_metrics``): the completed requests'
    tokens counted in one-second buckets ``int(token time - first send)``, over
    ``int(ceil(last finish - first send)) + 1`` buckets; the fullest bucket. A step's tokens
    are the emission runs covering it (every token lands at its step's end)."""
    done = r.finished
    n = r.num_steps
    if not done.any() or n == 0:
        return 0.0
    start = float(r.sent_s[done].min())
    span = math.ceil(float(r.finish_s[done].max()) - start) + 1
    tokens = np.cumsum(np.bincount(r.seg_first, minlength=n + 1)
                       - np.bincount(r.seg_last + 1, minlength=n + 1))[:n]
    since = r.steps.end_s - start
    keep = (tokens > 0) & (since >= 0) & (since < span)
    if not keep.any():
        return 0.0
    # int() truncation, as vLLM's, kept in float (no int64 overflow). Only the buckets that
    # hold tokens: a span-long array (vLLM's np.zeros(duration)) is 8 bytes per simulated
    # second, 25.6 GiB for azure-code --time-scale 1e6.
    _, which = np.unique(np.floor(since[keep]), return_inverse=True)
    return float(np.bincount(which, weights=tokens[keep]).max())


def itl_pairs(r: SimulationResult) -> tuple[FloatArray, IntArray]:
    """Every inter-token gap as (value, count) pairs, from the step records alone.

    Within an emission run a request samples at the end of every step, so each step gap
    ``end[j + 1] - end[j]`` is an ITL of every run covering steps j and j + 1 (first <= j <
    last): one value, counted that many times. A request's gap across two of its runs
    (after a preemption or a skipped step) is one more value, counted once::

        runs    A [0 ....... 3]   B [1 .. 2]  [4 .. 5]       steps 0 1 2 3 4 5
        counts  gap 0->1: 1 (A)   1->2: 2 (A, B)   2->3: 1   3->4: 0   4->5: 1; B 2->4: 1

    The same multiset as every request's token-time differences (``SimulationResult.itl_s``)
    in O(steps + runs) memory instead of one float per output token.
    """
    ends = r.steps.end_s
    n = len(ends)
    if n < 2:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    opened = np.bincount(r.seg_first, minlength=n)
    closed = np.bincount(r.seg_last, minlength=n)
    cover = np.cumsum(opened - closed)[:n - 1]
    order = np.lexsort((r.seg_first, r.seg_req))
    req, first, last = r.seg_req[order], r.seg_first[order], r.seg_last[order]
    same = req[1:] == req[:-1]
    between = ends[first[1:][same]] - ends[last[:-1][same]]
    return (np.concatenate([np.diff(ends), between]),
            np.concatenate([cover, np.ones(len(between), dtype=np.int64)]))


def itl_stat(r: SimulationResult, percentiles: Sequence[float]) -> Stat:
    """ITL mean / median / std / percentiles (ms) from ``itl_pairs``: numpy's figures over
    every gap (median and percentiles to the bit, sums exact; kvplan.analysis.weighted)."""
    values, counts = itl_pairs(r)
    s = summarize(values, counts, percentiles)
    return Stat(mean_ms=s.mean * 1000, median_ms=s.median * 1000, std_ms=s.std * 1000,
                percentiles_ms=tuple((p, v * 1000) for p, v in s.percentiles))


def benchmark_duration(r: SimulationResult) -> float:
    """From the benchmark start (t = 0) to the last answer (vLLM: benchmark_duration).

    vLLM starts the clock before ``get_request`` sleeps the first arrival gap and stops it
    when every request has answered, failed ones included: a rejected request at
    ``failed_s`` (when its failure came back: after the API server admitted it), else at
    its send (a run without an API path).
    """
    failed = r.sent_s if r.failed_s is None else r.failed_s
    ends = [r.finish_s[r.finished], failed[np.array(sorted(r.rejected), dtype=np.int64)]]
    end = np.concatenate(ends)
    end = end[~np.isnan(end)]
    return float(end.max()) if len(end) else 0.0


def _rate(x: float, over: float) -> float:
    return x / over if over > 0 else 0.0


def _stat(x: FloatArray, percentiles: Sequence[float]) -> Stat:
    """vLLM: np.mean(x or 0) * 1000 etc.; an empty list counts as [0]."""
    v = x if len(x) else np.zeros(1)
    return Stat(
        mean_ms=float(np.mean(v)) * 1000, median_ms=median(v) * 1000,
        std_ms=float(np.std(v)) * 1000,
        percentiles_ms=tuple((float(p), percentile(v, p) * 1000) for p in percentiles),
    )


def percentile(v: FloatArray, p: float) -> float:
    """np.percentile(v, p) of a non-empty 1-D array, to the bit (NaN if any is NaN), without
    the numpy.ma import it makes (kvplan.analysis.weighted.sorted_percentile)."""
    if np.isnan(v).any():
        return math.nan
    return sorted_percentile(np.sort(v), float(p))


def median(v: FloatArray) -> float:
    """np.median(v) of a non-empty 1-D array, to the bit (the mean of the middle one or two
    order statistics, NaN if any is NaN), without the numpy.ma import np.median makes (~20 ms
    of a simulate run)."""
    lo, hi = (v.size - 1) // 2, v.size // 2
    part = np.partition(v, sorted({lo, hi}))
    if np.isnan(v).any():
        return math.nan
    return float(np.mean(part[lo:hi + 1]))


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
        "max_output_tokens_per_s": m.max_output_tokens_per_s,
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


def kv_usage_series(r: SimulationResult, max_points: int = 2000) -> dict[str, list[Any]]:
    """The per-step KV series cut to at most ``max_points`` bins, keeping each bin's peak
    (counts and bytes as integers, times in seconds)."""
    st = r.steps
    n = r.num_steps
    if n == 0:
        return {k: [] for k in ("time_s", "used_blocks", "logical_bytes", "running", "waiting")}
    edges = np.linspace(0, n, min(n, max_points) + 1).astype(np.int64)
    starts = edges[:-1]

    def peak(a: npt.NDArray[Any]) -> list[int]:
        return [int(x) for x in np.maximum.reduceat(a, starts)]

    return {"time_s": [float(x) for x in st.start_s[starts]], "used_blocks": peak(st.used_blocks),
            "logical_bytes": peak(st.logical_bytes), "running": peak(st.running),
            "waiting": peak(st.waiting)}


PER_REQUEST_KEYS = ("input_lens", "output_lens", "ttfts", "itls", "errors", "rejected")
"""The per-request lists: vLLM's ``vllm bench serve`` writes its five only with
``--save-detailed``; ``rejected`` is kvplan's (``rejected_by_reason`` sums it up)."""


def save_result_json(r: SimulationResult, m: Metrics, header: dict[str, Any], *,
                     detailed: bool = True, flat_itls: bool = False) -> dict[str, Any]:
    """The whole --save-result object: header, vLLM keys, kvplan extras, and with
    ``detailed`` the per-request lists (PER_REQUEST_KEYS), as ``--save-detailed`` asks;
    ``flat_itls``: the itls as ItlRows (json_out.dumps_chunks writes them a chunk at a time)."""
    out = dict(header)
    out.update(vllm_result(m))
    if detailed:
        out.update(per_request_lists(r, flat_itls=flat_itls))
    out.update(kvplan_extras(m))
    out["kv_usage"] = kv_usage_series(r)
    if detailed:
        out["rejected"] = rejected_list(r)
    return out


def per_request_lists(r: SimulationResult, *, flat_itls: bool = False) -> dict[str, Any]:
    """vLLM's five per-request lists: one entry per request, in request order, failed ones
    included (vllm/benchmarks/serve.py builds them over every output: a failed request has
    its prompt_len, output length 0, ttft 0.0, no itls and its error; "" when it succeeded)."""
    done = r.finished
    ttfts = np.zeros(r.num_requests)
    ttfts[done] = per_request(r)["ttft"]
    itls = itl_rows(r)
    return {"input_lens": r.prompt_tokens.tolist(),
            "output_lens": np.where(done, r.output_tokens, 0).tolist(),
            "ttfts": ttfts.tolist(), "itls": itls if flat_itls else itls.tolist(),
            "errors": [r.rejected.get(i, "") for i in range(r.num_requests)]}


def rejected_list(r: SimulationResult) -> list[dict[str, Any]]:
    """The rejected requests by index, with vLLM's (or kvplan's) reason."""
    return [{"index": i, "reason": why} for i, why in sorted(r.rejected.items())]


def per_request_itls(r: SimulationResult) -> list[list[float]]:
    """Gaps between consecutive tokens of each completed request (vLLM's ``itls``), in order."""
    rows = itl_rows(r).tolist()
    return [rows[i] for i in np.flatnonzero(r.finished).tolist()]
