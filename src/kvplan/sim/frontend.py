"""The API server in front of the engine: when each served request reaches the engine.

Two parts (``Profile``): a parallel path of ``api_delays_s(prompt)`` per request (HTTP,
hand-off to the engine core, the first token's way back), and the server's one process,
which admits requests one at a time in send order, ``api_admissions_s`` each (parsing,
validation, chat template, tokenisation in vLLM's single asyncio process). A request sent
at t leaves that FIFO server at ``S = max(t, S of the one before) + admission`` and reaches
the engine at ``S + delay``.
"""

from __future__ import annotations

from collections.abc import Collection
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
    ``S_k = max(sent_k, S_{k-1}) + service_k``, in the compiled core where it was built
    (the same float operations: tests/test_sim_core.py), else this loop."""
    from kvplan.sim.core import module

    out = np.empty(len(sent))
    mod = module()
    if mod is not None:
        mod.fifo_exits(np.ascontiguousarray(sent, dtype=np.float64),
                       np.ascontiguousarray(service, dtype=np.float64), out)
        return out
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
        if closed or not bool(np.any(np.diff(arrival) < 0)):
            return FrontEnd(None, None, None, arrival.tolist())
        order = np.argsort(arrival, kind="stable")  # open loop: FCFS by arrival
        return FrontEnd(None, None, order.tolist(), arrival[order].tolist())
    delay, admit = (d.tolist() if has_d else None), (a.tolist() if has_a else None)
    if closed:
        return FrontEnd(delay, admit, None, arrival.tolist())
    engine_at = engine_arrivals(timer, arrival, prompt)
    order = np.argsort(engine_at, kind="stable")
    return FrontEnd(delay, admit, order.tolist(), engine_at[order].tolist())


def refusal_times(fe: FrontEnd, sent: FloatArray, refused: Collection[int],
                  closed: bool) -> FloatArray | None:
    """When each refused request's failure reached the client (NaN for the others); None
    where the run has no API path (refused as sent). The API server refuses a request once
    it has admitted it (vLLM checks prompt + max_tokens on the token ids, after tokenising),
    so the error is back when a served request would reach the engine: the moment a closed
    loop frees the refused request's slot (``_Loop._release``), and the one vLLM bench's
    duration waits for (``asyncio.gather`` of every request)."""
    if not refused or (fe.delay is None and fe.admit is None):
        return None
    n = len(sent)
    if closed:  # sent in send order through the FIFO, as _Loop._release gates them online
        admit = np.zeros(n) if fe.admit is None else np.asarray(fe.admit, np.float64)
        at = fifo_exits(sent, admit) + (0.0 if fe.delay is None else np.asarray(fe.delay))
    else:  # the release plan: engine arrivals in release order
        at = np.empty(n)
        at[np.asarray(fe.order, dtype=np.int64)] = fe.arrivals
    out = np.full(n, np.nan)
    gone = np.fromiter(refused, dtype=np.int64, count=len(refused))
    out[gone] = at[gone]
    return out
