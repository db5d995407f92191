"""The API server in front of the engine: when each served request reaches the engine.

Two parts (``Profile``): a parallel path of ``api_delays_s(prompt)`` per request (HTTP,
hand-off to the engine core, the first token's way back), and the server's one process,
which admits requests one at a time in send order, ``api_admissions_s`` each (parsing,
validation, chat template, tokenisation in vLLM's single asyncio process). A request sent
at t leaves that FIFO server at ``S = max(t, S of the one before) + admission`` and reaches
the engine at ``S + delay``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvplan.sim.result import FloatArray, IntArray


@dataclass(frozen=True, slots=True)
class FrontEnd:
    """The release plan of a run: ``order`` / ``arrivals`` (open loop: engine arrival times in
    release order, FCFS), ``delay`` and ``admit`` per release position (closed loop: applied
    online as slots free). None where the run has no API path."""

    delay: list[float] | None
    admit: list[float] | None
    order: list[int] | None
    arrivals: list[float]


def fifo_exits(sent: FloatArray, service: FloatArray) -> FloatArray:
    """When each job leaves one FIFO server (jobs in arrival order, ``sent`` ascending):
    ``S_k = max(sent_k, S_{k-1}) + service_k``, the same float operations as the loop."""
    out = np.empty(len(sent))
    free = 0.0
    for k, (t, s) in enumerate(zip(sent.tolist(), service.tolist(), strict=True)):
        free = (free if free > t else t) + s
        out[k] = free
    return out


def _paths(timer: Any, n: int, prompt: IntArray) -> tuple[FloatArray, FloatArray]:
    """(parallel delay, serial admission) per request; zeros where the timer has none."""
    delays, admissions = getattr(timer, "api_delays_s", None), getattr(
        timer, "api_admissions_s", None)
    d = np.zeros(n) if delays is None else np.asarray(delays(prompt), np.float64)
    a = np.zeros(n) if admissions is None else np.asarray(admissions(prompt), np.float64)
    return d, a


def engine_arrivals(timer: Any, arrival: FloatArray, prompt: IntArray) -> FloatArray:
    """Open loop: when each request (sent at ``arrival``) reaches the engine."""
    d, a = _paths(timer, len(arrival), prompt)
    if not np.max(a, initial=0.0) > 0.0:
        return arrival + d
    fifo = np.argsort(arrival, kind="stable")
    exits = np.empty(len(arrival))
    exits[fifo] = fifo_exits(arrival[fifo], a[fifo])
    return exits + d


def plan_front_end(timer: Any, arrival: FloatArray, prompt: IntArray,
                   closed: bool) -> FrontEnd:
    """The release plan for ``timer``'s API path (none if it prices none)."""
    d, a = _paths(timer, len(arrival), prompt)
    has_d, has_a = bool(np.max(d, initial=0.0) > 0.0), bool(np.max(a, initial=0.0) > 0.0)
    if not (has_d or has_a):
        return FrontEnd(None, None, None, arrival.tolist())
    delay, admit = (d.tolist() if has_d else None), (a.tolist() if has_a else None)
    if closed:
        return FrontEnd(delay, admit, None, arrival.tolist())
    engine_at = engine_arrivals(timer, arrival, prompt)
    order = np.argsort(engine_at, kind="stable")
    return FrontEnd(delay, admit, order.tolist(), engine_at[order].tolist())


def step_tokens(num_steps: int, seg_first: IntArray, seg_last: IntArray) -> IntArray:
    """Output tokens the engine emits at the end of each step (one per emission run covering
    it: a decode, or a prefill's last chunk)."""
    marks = np.zeros(num_steps + 1, dtype=np.int64)
    np.add.at(marks, seg_first, 1)
    np.add.at(marks, seg_last + 1, -1)
    return np.cumsum(marks[:-1])


def stream_delivery(ends: FloatArray, tokens: IntArray, per_token_s: float) -> FloatArray:
    """When the API server has streamed each step's tokens to their clients: its one process
    takes a step's ``tokens`` at the step's end, after the step before it, ``per_token_s``
    each (detokenise, format and send the chunk)::

        D_j = max(end_j, D_(j-1)) + per_token_s x tokens_j

    evaluated as ``C_j + max_(i <= j)(end_i - C_(i-1))`` with ``C`` the running sum of the
    service times (the same recursion unrolled, so the simulator and the replay share it)."""
    work = per_token_s * np.asarray(tokens, dtype=np.float64)
    done = np.cumsum(work)
    before = done - work
    out: FloatArray = done + np.maximum.accumulate(np.asarray(ends, np.float64) - before)
    return out


@dataclass(frozen=True, slots=True)
class Delivery:
    """Client-visible times once the API server has streamed the tokens: per step, and each
    request's first token and finish."""

    step_s: FloatArray
    first_token_s: FloatArray
    finish_s: FloatArray


def deliver(timer: Any, ends: FloatArray, segs: tuple[IntArray, IntArray, IntArray],
            first_token_s: FloatArray, finish_s: FloatArray) -> Delivery | None:
    """``stream_delivery`` applied to a run's steps (None where ``timer`` streams for free):
    a request's first token and finish move to when its step's tokens were streamed."""
    per_token = float(getattr(timer, "api_stream_s", 0.0) or 0.0)
    if not per_token > 0.0 or not len(ends):
        return None
    req, first, last = segs
    at = stream_delivery(ends, step_tokens(len(ends), first, last), per_token)
    n = len(first_token_s)
    lo = np.full(n, len(ends), dtype=np.int64)
    hi = np.full(n, -1, dtype=np.int64)
    np.minimum.at(lo, req, first)
    np.maximum.at(hi, req, last)
    seen = hi >= 0
    ft, fin = first_token_s.copy(), finish_s.copy()
    ft[seen] = at[lo[seen]]
    done = seen & np.isfinite(finish_s) & (finish_s > 0)
    fin[done] = at[hi[done]]
    return Delivery(at, ft, fin)
