"""Safe work bounds of a disaggregated fleet: prefill compute, link and decode work that the
requests meeting a percentile bound must finish between the judged window's first arrival
and its last arrival plus the limit; a fleet that cannot is dropped, never one that could pass.

    g       = floor((n - 1) p / 100) + 1        judged requests that must be <= the limit
                                                (numpy's linear percentile is >= its lower rank)
    window  = last judged arrival + limit - first judged arrival            (s)
    prune   when  sum of the g smallest per-request works  >  lanes x rate x window

    TTFT  prefill: work P tokens,            rate x instances x best tokens/s of one step
          link:    work wire_s(P),           min(x, y) transfers at once (each holds one prefill
                                             and one decode instance's NICs), 1 s per s
    E2EL  decode:  work (output - 1) tokens, y instances x best tokens/s of a decode batch
    TTFT  decode KV: work blocks(P) x hold, hold = wire_s(P) + output x t_min (the blocks are
          allocated before the transfer, by the deadline, and held through ``output``
          decode steps of at least t_min, one sequence at no context); capacity y x the
          instance's blocks; the window extends by the longest hold (holds outlast it)
Each good request's work ends before its first token (TTFT) or last token (E2EL), hence
before ``last arrival + limit``, and starts after its arrival. The same holds for any run of
k judged requests consecutive by arrival (a burst): at most b = n - g of them may miss, so

    prune   when  burst's work - the b largest works of all judged  >  capacity x
                  (last - first arrival of the burst + limit)

(the b largest of all bound the b largest of the burst), checked for k = b + 1, b + 2,
b + 4, ... after the whole-trace bound (``burst_miss``). Rates are the best tokens per
second over a grid of step sizes at zero context (context only adds time), each step split
evenly over 1..max_num_seqs prompts (fewer tokens per prompt: fewer attention pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvplan.analysis.plan.judge import good_needed, judged_mask
from kvplan.costs.step.roofline import StepCostModel
from kvplan.sim.state import FloatArray
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkCeilings:
    """A fleet's best rates: prefill and decode tokens/s (whole pool), parallel transfers."""

    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    transfer_lanes: int


def best_tokens_per_s(timer: StepCostModel, most: int, max_seqs: int = 1) -> float:
    """Best tokens/s of one step of 1..``most`` new tokens at no context, each step split
    evenly over 1..``max_seqs`` prompts (``plan.bounds.split_prefill_s``: several short
    prompts score fewer attention pairs than one long one)."""
    from kvplan.analysis.plan.bounds import split_prefill_s

    grid = sorted({1, most, *(2 ** k for k in range(1, 20) if 2 ** k < most),
                   *range(256, most, 256)})
    return max(float(n) / split_prefill_s(timer.step_time_s, n, max_seqs) for n in grid)


def best_decode_tokens_per_s(timer: StepCostModel, max_seqs: int) -> float:
    """Best tokens/s of one decode step of 1..``max_seqs`` sequences at no context."""
    grid = sorted({1, max_seqs, *(2 ** k for k in range(1, 20) if 2 ** k < max_seqs)})
    return max(float(b) / float(timer.step_time_s(np.ones(b, dtype=np.int64),
                                           np.zeros(b, dtype=np.int64))) for b in grid)


def _judged(work: Workload, slo: Slo) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    from kvplan.analysis.plan.judge import Latencies

    arrival = np.asarray(work.arrival_s, dtype=np.float64)
    lat = Latencies(arrival_s=arrival, ttft_ms=arrival, tpot_ms=arrival, e2el_ms=arrival,
                    itl_ms=None, itl_req=None, output_tokens=np.asarray(work.output_tokens),
                    concurrency=None)
    return arrival, judged_mask(lat, slo)


def window_miss(work: Workload, slo: Slo, metric: str, per_request: FloatArray,
                capacity_per_s: float, what: str, extra_s: float = 0.0) -> str:
    """Why the judged requests' ``per_request`` work cannot fit every ``metric`` bound, or ''
    (``extra_s``: how far past the last deadline the work may still run)."""
    arrival, keep = _judged(work, slo)
    n = int(keep.sum())
    for b in slo.bounds:
        if b.metric != metric or n == 0:
            continue
        g = good_needed(n, b.percentile)
        least = float(np.sort(per_request[keep])[:g].sum())
        window_s = float(arrival[keep].max() - arrival[keep].min()) + b.limit_ms / 1000 \
            + extra_s
        if least > capacity_per_s * window_s:
            return (f"{b.key}: the {g:,} requests that must meet {b.limit_ms:g} ms need "
                    f"{least:,.0f} {what}, more than the fleet's {capacity_per_s:,.0f}/s x "
                    f"{window_s:,.1f} s allow")
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Burst:
    """Under one percentile bound, the run of judged requests (consecutive by arrival) whose
    work needs the highest rate: ``need`` within ``window_s``."""

    key: str
    limit_ms: float
    requests: int
    good: int
    """Of them, at least this many must meet the limit (all but b = n - g)."""
    start_s: float
    span_s: float
    need: float
    """Their work less the b largest works of all judged requests."""
    window_s: float
    """span + limit + the extra hold."""


def worst_bursts(work: Workload, slo: Slo, metric: str, per_request: FloatArray,
                 extra_s: float = 0.0) -> tuple[Burst, ...]:
    """Per ``metric`` bound, the run of k = b + 1, b + 2, b + 4, ... (< n) judged requests
    needing the highest rate (the module docstring); what a fleet's capacity is checked
    against (``burst_miss``): the same for every fleet with the same per-request work."""
    arrival, keep = _judged(work, slo)
    order = np.argsort(arrival[keep], kind="stable")
    at, per = arrival[keep][order], np.asarray(per_request, dtype=np.float64)[keep][order]
    n = len(at)
    sums = np.concatenate(([0.0], np.cumsum(per)))
    out = []
    for b in slo.bounds:
        if b.metric != metric or n == 0:
            continue
        bad = n - good_needed(n, b.percentile)
        top = float(np.sort(per)[n - bad:].sum()) if bad else 0.0
        best, k = None, bad + 1
        while k < n:
            need = sums[k:] - sums[:-k] - top
            window = at[k - 1:] - at[:n - k + 1] + b.limit_ms / 1000 + extra_s
            rate = need / np.maximum(window, 1e-300)
            i = int(np.argmax(rate))
            if best is None or rate[i] > best.need / max(best.window_s, 1e-300):
                best = Burst(key=b.key, limit_ms=b.limit_ms, requests=k, good=k - bad,
                             start_s=float(at[i]), span_s=float(at[i + k - 1] - at[i]),
                             need=float(need[i]), window_s=float(window[i]))
            k = bad + 2 * (k - bad)
        if best is not None:
            out.append(best)
    return tuple(out)


def burst_text(bursts: tuple[Burst, ...], capacity_per_s: float, what: str) -> str:
    """Why the fleet's ``capacity_per_s`` cannot serve one of ``bursts``, or ''."""
    for b in bursts:
        if b.need > capacity_per_s * b.window_s:
            return (f"{b.key}: of the {b.requests:,} requests arriving in {b.span_s:,.1f} s "
                    f"from {b.start_s:,.1f} s, at least {b.good:,} must meet {b.limit_ms:g} "
                    f"ms and need at least {b.need:,.0f} {what}, more than the fleet's "
                    f"{capacity_per_s:,.0f}/s x {b.window_s:,.1f} s allow")
    return ""


def burst_miss(work: Workload, slo: Slo, metric: str, per_request: FloatArray,
               capacity_per_s: float, what: str, extra_s: float = 0.0) -> str:
    """``window_miss`` on bursts (``worst_bursts``), or ''."""
    return burst_text(worst_bursts(work, slo, metric, per_request, extra_s), capacity_per_s,
                      what)
