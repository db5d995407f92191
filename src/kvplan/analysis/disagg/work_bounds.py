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
before ``last arrival + limit``, and starts after its arrival. Rates are the best tokens per
second over a grid of step sizes at zero context (context and batch-mates only add time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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


def window_miss(work: Workload, slo: Slo, metric: str, per_request: FloatArray,
                capacity_per_s: float, what: str, extra_s: float = 0.0) -> str:
    """Why the judged requests' ``per_request`` work cannot fit every ``metric`` bound, or ''
    (``extra_s``: how far past the last deadline the work may still run)."""
    from kvplan.analysis.plan.judge import Latencies

    arrival = np.asarray(work.arrival_s, dtype=np.float64)
    lat = Latencies(arrival_s=arrival, ttft_ms=arrival, tpot_ms=arrival, e2el_ms=arrival,
                    itl_ms=None, itl_req=None, output_tokens=np.asarray(work.output_tokens),
                    concurrency=None)
    keep = judged_mask(lat, slo)
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
