"""Judge simulated latencies against an Slo on the steady-state window (vLLM metric rules).

Per request, as `vllm bench serve` defines them: ttft = first token - sent, e2el = finish -
sent, tpot = (e2el - ttft) / (output - 1) (none for 1-token outputs), itl = every gap between
consecutive tokens. A request that never finished counts as failing every bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvplan.analysis.plan.noise import Interval, judged_percentile, share_interval
from kvplan.sim.result import SimulationResult
from kvplan.specs.slo import Slo

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
NEVER_MS = 1e12
"""Latency recorded for a request that never finished (finite, so JSON stays strict)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Latencies:
    """Per-request latencies in ms (NEVER_MS where unfinished), and ITL gaps with owners."""

    arrival_s: FloatArray
    ttft_ms: FloatArray
    tpot_ms: FloatArray
    """NaN for 1-token outputs (vLLM leaves them out of TPOT)."""
    e2el_ms: FloatArray
    itl_ms: FloatArray | None
    """Every inter-token gap; None when built for an SLO without an ITL bound."""
    itl_req: IntArray | None
    output_tokens: IntArray
    concurrency: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """Achieved value and margin per SLO term; ``ok`` when every margin is >= 0.

    Margins: (limit - achieved) / limit for percentile bounds, share - target for goodput.
    """

    achieved: tuple[tuple[str, float], ...]
    margins: tuple[tuple[str, float], ...]
    judged_requests: int
    intervals: tuple[tuple[str, Interval], ...] = ()
    """Each term's 95 % sampling interval (plan_noise): percentiles by order statistics,
    the goodput share by Wilson's score interval."""
    within_noise: tuple[str, ...] = ()
    """The terms whose limit lies inside their interval: another sample could flip them."""
    goodput_misses: tuple[tuple[str, float], ...] = ()
    """Per goodput metric, the share of judged requests over its bound (which one binds)."""
    unsampled: tuple[str, ...] = ()
    """The percentile terms no judged request has a value of (TPOT / ITL of 1-token outputs:
    vLLM's placeholder 0 stands in ``achieved``)."""

    @property
    def ok(self) -> bool:
        return all(m >= 0 for _, m in self.margins)

    @property
    def margin(self) -> float:
        return min(m for _, m in self.margins)

    @property
    def binding(self) -> str:
        """The SLO term with the smallest margin."""
        return min(self.margins, key=lambda kv: kv[1])[0]

    def value(self, key: str) -> float:
        return dict(self.achieved)[key]


def latencies(r: SimulationResult, concurrency: int | None = None, *,
              itl: bool = True) -> Latencies:
    """Per-request latencies of one simulation (``itl``: with every inter-token gap, which
    only an ITL bound reads; a plan's other SLOs skip building them)."""
    done = r.finished
    sent = r.sent_s
    ttft = np.where(done, r.first_token_s - sent, np.inf)
    e2el = np.where(done, r.finish_s - sent, np.inf)
    out = r.output_tokens
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / np.maximum(out - 1, 1), np.nan)
    tpot = np.where(done | (out <= 1), tpot, np.inf)
    gaps, owner = _itl(r) if itl else (None, None)
    return Latencies(arrival_s=r.arrival_s, ttft_ms=_ms(ttft), tpot_ms=_ms(tpot),
                     e2el_ms=_ms(e2el), itl_ms=None if gaps is None else gaps * 1000,
                     itl_req=owner, output_tokens=out, concurrency=concurrency)


def _ms(x: FloatArray) -> FloatArray:
    return np.where(np.isinf(x), NEVER_MS, x * 1000)


def _itl(r: SimulationResult) -> tuple[FloatArray, IntArray]:
    """Every inter-token gap (s) and the request it belongs to."""
    order = np.lexsort((r.seg_first, r.seg_req))
    req, first, last = r.seg_req[order], r.seg_first[order], r.seg_last[order]
    ends = r.steps.end_s
    lens = last - first
    idx = _ranges(first, lens)
    within = ends[idx + 1] - ends[idx]
    within_req = np.repeat(req, lens)
    same = req[1:] == req[:-1]
    between = ends[first[1:][same]] - ends[last[:-1][same]]
    return (np.concatenate([within, between]),
            np.concatenate([within_req, req[1:][same]]).astype(np.int64))


def _ranges(starts: IntArray, lens: IntArray) -> IntArray:
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    out: IntArray = np.arange(total, dtype=np.int64) + offsets
    return out


def merge(parts: Sequence[tuple[Latencies, IntArray]]) -> Latencies:
    """One fleet's latencies from its replicas' (latencies, global request ids)."""
    n = sum(len(ids) for _, ids in parts)
    cols = {k: np.zeros(n) for k in ("arrival_s", "ttft_ms", "tpot_ms", "e2el_ms")}
    out = np.zeros(n, dtype=np.int64)
    for lat, ids in parts:
        for k, col in cols.items():
            col[ids] = getattr(lat, k)
        out[ids] = lat.output_tokens
    itl, owner = _merged_itl(parts)
    return Latencies(arrival_s=cols["arrival_s"], ttft_ms=cols["ttft_ms"],
                     tpot_ms=cols["tpot_ms"], e2el_ms=cols["e2el_ms"], itl_ms=itl,
                     itl_req=owner, output_tokens=out)


def _merged_itl(parts: Sequence[tuple[Latencies, IntArray]]
                ) -> tuple[FloatArray | None, IntArray | None]:
    """The replicas' gaps end to end with global owners (None when they were not built)."""
    if not parts:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    if any(lat.itl_ms is None or lat.itl_req is None for lat, _ in parts):
        return None, None
    itl = np.concatenate([lat.itl_ms for lat, _ in parts])
    owner = np.concatenate([ids[lat.itl_req] for lat, ids in parts])
    return itl, owner.astype(np.int64)


def judged_mask(lat: Latencies, slo: Slo) -> npt.NDArray[np.bool_]:
    """Requests in the steady-state window: all but the first ones by arrival (WarmupRule)."""
    n = len(lat.arrival_s)
    order = np.argsort(lat.arrival_s, kind="stable")
    keep = np.ones(n, dtype=bool)
    keep[order[: slo.warmup.first_judged(n, lat.concurrency)]] = False
    return keep


def judge(lat: Latencies, slo: Slo, *, intervals: bool = True) -> Verdict:
    """Achieved percentiles / goodput share on the judged window, and their margins
    (``intervals=False``: without the sampling intervals, for a verdict nobody reads them
    off, the analytic zero-load one)."""
    keep = judged_mask(lat, slo)
    achieved: list[tuple[str, float]] = []
    margins: list[tuple[str, float]] = []
    cis: list[tuple[str, Interval]] = []
    noisy: list[str] = []
    misses: tuple[tuple[str, float], ...] = ()
    empty: list[str] = []
    for b in slo.bounds:
        values = _values(lat, b.metric, keep)
        if len(values) == 0:
            empty.append(b.key)
        v, ci = judged_percentile(values, b.percentile, interval=intervals)
        achieved.append((b.key, v))
        margins.append((b.key, (b.limit_ms - v) / b.limit_ms))
        if ci is None or ci.n == 0:  # no value judged (e.g. no TPOT of 1-token outputs):
            continue                 # vLLM's placeholder 0, no interval, no noise
        cis.append((b.key, ci))
        if ci.holds(b.limit_ms) is None:
            noisy.append(b.key)
    if slo.goodput_ms:
        share = goodput_share(lat, keep, slo.goodput_ms)
        misses = tuple((m, 1.0 - goodput_share(lat, keep, ((m, ms),)))
                       for m, ms in slo.goodput_ms)
        achieved.append(("goodput_share", share))
        margins.append(("goodput_share", share - slo.goodput_target))
        n = int(keep.sum())
        if not intervals:
            return Verdict(achieved=tuple(achieved), margins=tuple(margins),
                           judged_requests=n, goodput_misses=misses, unsampled=tuple(empty))
        ci = share_interval(round(share * n), n)
        cis.append(("goodput_share", ci))
        if ci.low is None or ci.high is None or ci.low < slo.goodput_target <= ci.high:
            noisy.append("goodput_share")
    return Verdict(achieved=tuple(achieved), margins=tuple(margins),
                   judged_requests=int(keep.sum()), intervals=tuple(cis),
                   within_noise=tuple(noisy), goodput_misses=misses, unsampled=tuple(empty))


def _values(lat: Latencies, metric: str, keep: npt.NDArray[np.bool_]) -> FloatArray:
    if metric == "itl":
        assert lat.itl_ms is not None and lat.itl_req is not None, "latencies built without ITL"
        return lat.itl_ms[keep[lat.itl_req]]
    v: FloatArray = getattr(lat, f"{metric}_ms")[keep]
    return v[~np.isnan(v)]


def goodput_share(lat: Latencies, keep: npt.NDArray[np.bool_],
                  bounds_ms: Sequence[tuple[str, float]]) -> float:
    """Share of judged requests meeting every bound (tpot of a completed 1-token output
    counts as 0); a request that never finished meets none (vLLM: only successful outputs)."""
    good = keep & (lat.e2el_ms < NEVER_MS)
    for name, ms in bounds_ms:
        good &= np.nan_to_num(getattr(lat, f"{name}_ms"), nan=0.0) <= ms
    return float(good.sum()) / max(1, int(keep.sum()))


def ttft_share_of_e2el(lat: Latencies, slo: Slo) -> float:
    """The judged finished requests' TTFT over their E2EL (sums): how much of an end-to-end
    latency is waiting for and computing the first token rather than decoding."""
    keep = judged_mask(lat, slo) & (lat.e2el_ms < NEVER_MS)
    total = float(lat.e2el_ms[keep].sum())
    return float(lat.ttft_ms[keep].sum()) / total if total > 0 else 0.0


def good_needed(n: int, percentile: float) -> int:
    """Judged values that must be <= the limit for the percentile to be (0 when n is 0)."""
    if n <= 0:
        return 0
    return min(n, math.floor((n - 1) * percentile / 100) + 1)
