"""The fewest replicas a finite trace needs: work that must end inside a deadline window.

The four ceilings of ``bounds`` are steady-state rates; a finite trace can be served above
them where the SLO leaves room to queue (200 requests in 2 s under ``e2el:p99:600000``: one
L40S serves them in 25 s, the ceiling asked for 7). A sound floor counts only the work that
the requests meeting a TTFT or E2EL limit must finish between their arrival and their
deadline (as ``disagg.work_bounds`` does per phase)::

    g       = floor((n - 1) p / 100) + 1 judged requests <= the limit (goodput: ceil(share n))
    run     = k judged requests consecutive by arrival, k = b + 1, b + 2, b + 4, ..., n
              (b = n - g may miss: their work counts less the b largest works of all)
    replicas >= (run's work - b largest) / (one replica's rate x (span + limit))

    resource            TTFT work per request     E2EL work per request       one replica's rate
    compute (s)         c_min x uncached prompt   c_min x (uncached + out-1)  1 s/s
    scheduler slots     TTFT0                     TTFT0 + (out - 1) t_min     max_num_seqs
    batch slot-steps    -                         output steps                S / t_decode(S)
    KV blocks           -                         blocks x (out - 1) t_min    usable blocks

A TPOT / ITL bound alone sets no floor (queued requests do not slow their decodes): 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvplan.analysis.plan.judge import good_needed
from kvplan.specs.slo import Slo

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class Works:
    """Per-request works (judged requests, by arrival) and one replica's rate of each."""

    arrival_s: FloatArray
    ttft: tuple[tuple[str, FloatArray, float], ...]
    e2el: tuple[tuple[str, FloatArray, float], ...]


def _terms(slo: Slo, n: int) -> list[tuple[str, str, float, int]]:
    """(key, metric, limit s, good needed) of every TTFT / E2EL term."""
    out = [(b.key, b.metric, b.limit_ms / 1000, good_needed(n, b.percentile))
           for b in slo.bounds if b.metric in ("ttft", "e2el")]
    good = min(n, math.ceil(slo.goodput_target * n - 1e-9))
    out += [("goodput_share", m, ms / 1000, good) for m, ms in slo.goodput_ms
            if m in ("ttft", "e2el")]
    return out


def _least(at: FloatArray, per: FloatArray, good: int, limit_s: float, rate: float) -> float:
    """The most replicas any run of judged requests needs (fractional)."""
    n = len(at)
    bad = n - good
    top = float(np.sort(per)[n - bad:].sum()) if bad else 0.0
    sums = np.concatenate(([0.0], np.cumsum(per)))
    most, k = 0.0, bad + 1
    while True:
        k = min(k, n)
        need = sums[k:] - sums[:-k] - top
        window = at[k - 1:] - at[:n - k + 1] + limit_s
        most = max(most, float(np.max(need / np.maximum(window, 1e-300))) / rate)
        if k == n:
            return most
        k = bad + 2 * (k - bad)


def window_replicas(w: Works, slo: Slo) -> tuple[int, str]:
    """The fewest replicas whose work rates fit every deadline window, and which binds."""
    n = len(w.arrival_s)
    best, why = 1, ""
    if n == 0:
        return best, why
    for key, metric, limit_s, good in _terms(slo, n):
        if good <= 0:
            continue
        for resource, per, rate in (w.ttft if metric == "ttft" else w.e2el):
            need = math.ceil(_least(w.arrival_s, per, good, limit_s, rate) - 1e-9)
            if need > best:
                best, why = need, f"{key} ({resource})"
    return best, why
