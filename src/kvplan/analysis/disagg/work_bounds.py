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
second over a grid of step sizes at zero context (context and batch-mates only add time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvplan.analysis.plan.judge import judged_mask
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


def good_needed(n: int, percentile: float) -> int:
    """Judged values that must be <= the limit for the percentile to be (0 when n is 0)."""
    if n <= 0:
        return 0
    return min(n, math.floor((n - 1) * percentile / 100) + 1)


def best_tokens_per_s(timer: StepCostModel, most: int) -> float:
    """Best tokens/s of one step of 1..``most`` new tokens (one sequence each) at no context."""
    grid = sorted({1, most, *(2 ** k for k in range(1, 20) if 2 ** k < most),
                   *range(256, most, 256)})
    zero = np.zeros(1, dtype=np.int64)
    return max(float(n) / float(timer.step_time_s(np.array([n]), zero)) for n in grid)


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


def burst_miss(work: Workload, slo: Slo, metric: str, per_request: FloatArray,
               capacity_per_s: float, what: str, extra_s: float = 0.0) -> str:
    """``window_miss`` on bursts: runs of k judged requests by arrival, k = b + 1, b + 2,
    b + 4, ... < n (b = n - g may miss; the module docstring), or ''."""
    arrival, keep = _judged(work, slo)
    order = np.argsort(arrival[keep], kind="stable")
    at, per = arrival[keep][order], np.asarray(per_request, dtype=np.float64)[keep][order]
    n = len(at)
    sums = np.concatenate(([0.0], np.cumsum(per)))
    for b in slo.bounds:
        if b.metric != metric or n == 0:
            continue
        bad = n - good_needed(n, b.percentile)
        top = float(np.sort(per)[n - bad:].sum()) if bad else 0.0
        k = bad + 1
        while k < n:
            need = sums[k:] - sums[:-k] - top
            room = capacity_per_s * (at[k - 1:] - at[:n - k + 1] + b.limit_ms / 1000 + extra_s)
            i = int(np.argmax(need - room))
            if need[i] > room[i]:
                span = float(at[i + k - 1] - at[i])
                return (f"{b.key}: of the {k:,} requests arriving in {span:,.1f} s from "
                        f"{at[i]:,.1f} s, at least {k - bad:,} must meet {b.limit_ms:g} ms and "
                        f"need at least {need[i]:,.0f} {what}, more than the fleet's "
                        f"{capacity_per_s:,.0f}/s x {room[i] / capacity_per_s:,.1f} s allow")
            k = bad + 2 * (k - bad)
    return ""
