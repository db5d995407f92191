"""Pipeline parallelism's batch queue: when a batch is back with up to ``pp`` in flight.

vLLM 0.11 (``v1/engine/core.py`` ``step_with_batch_queue``, a queue of the executor's
``max_concurrent_batches`` = ``pipeline_parallel_size`` batches) schedules another batch at
once while the queue is not full and its oldest batch is not back; otherwise it blocks on
the oldest. The step model prices a batch alone as ``host + stage + (pp - 1) x (stage +
hop)`` (``kvplan.costs.step.batch.AggregateForm``: host = overhead_s[prefill] + request_s x R,
hop = p2p[T]); in flight, the engine's host work runs one batch at a time and each stage
holds one batch at a time::

    host_k  = [max(scheduled_k, host end of k-1), + host]
    stage 0 = from max(host_k end, k-1's end on stage 0)           for stage seconds
    stage j = from max(end on stage j-1 + hop, k-1's end on stage j)  for stage seconds

The batch is back at its end on the last stage; a batch alone takes the one-batch step time
(up to float rounding). The simulator (``kvplan.sim.pipeline``) and the static batch
(``kvplan.costs.step.latency``) both time batches with ``pass_stages``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvplan.costs.step.batch import IntArray
from kvplan.costs.step.coefficients import TABLE_CAP, at

Free = tuple[float, ...]
"""When the host and each stage are next free: (host, stage 0, ..., stage pp - 1)."""


@dataclass(frozen=True, slots=True)
class Split:
    """The step model's pieces of one batch: ``pp`` stages, the hop table ``p2p[T]`` between
    two stages (the line through its last two entries past its end), the host's fixed
    seconds (without, with prefill) and seconds per request."""

    pp: int
    p2p: np.ndarray
    overhead_s: tuple[float, float]
    request_s: float

    def parts(self, step_s: float, new: IntArray, ctx: IntArray) -> tuple[float, float, float]:
        """(host, hop, stage) seconds of a batch whose step alone takes ``step_s``."""
        prefill = int(new.max()) > 1 or int(ctx.min()) == 0  # costs.step.sums.has_prefill
        host = self.overhead_s[int(prefill)] + self.request_s * len(new)
        hop = float(at(self.p2p, int(new.sum())))
        return host, hop, (step_s - host - (self.pp - 1) * hop) / self.pp

    def idle(self) -> Free:
        """Host and stages free from time 0."""
        return (0.0,) * (self.pp + 1)


def split(timer: Any, max_tokens: int) -> Split | None:
    """The timer's pipeline pieces, or None when it has one stage (or does not say):
    ``pipeline_stages``, else the step model's ``constants.pp``, then its AggregateForm
    for steps of up to ``max_tokens`` tokens."""
    pp = int(getattr(timer, "pipeline_stages", 0) or getattr(
        getattr(timer, "constants", None), "pp", 1))
    make = getattr(timer, "aggregate_form", None) if pp > 1 else None
    form = make(max_tokens) if make is not None else None
    if form is None or form.p2p is None or form.pp_minus_1 < 1 or form.overlap_host:
        return None
    return Split(pp=int(form.pp_minus_1) + 1, p2p=form.p2p, overhead_s=form.overhead_s,
                 request_s=form.request_s)


def pass_stages(free: Free, scheduled_s: float, host: float, hop: float,
                stage: float) -> Free:
    """``free`` after a batch scheduled at ``scheduled_s`` passes the host and the stages;
    its last entry is when the batch is back."""
    host_end = max(scheduled_s, free[0]) + host
    out, end = [host_end], host_end
    for j, busy_until in enumerate(free[1:]):
        end = max(end + hop if j else end, busy_until) + stage
        out.append(end)
    return tuple(out)


def queued_backs(sp: Split, batches: Iterable[tuple[float, IntArray, IntArray]]) -> list[float]:
    """When each of a run of batches (step seconds alone, new, context) is back, scheduled
    from time 0 by ``step_with_batch_queue``'s rule: another at once while fewer than ``pp``
    are queued and the oldest is not back, else block on the oldest. Every batch must hold
    work that needs no earlier batch's token (a prompt's chunks, other prompts)."""
    free, clock = sp.idle(), 0.0
    queue: deque[float] = deque()
    backs = []
    for step_s, new, ctx in batches:
        free = pass_stages(free, clock, *sp.parts(step_s, new, ctx))
        queue.append(free[-1])
        backs.append(free[-1])
        if len(queue) >= sp.pp or queue[0] <= clock:
            clock = max(clock, queue.popleft())
    return backs


def prefill_back_s(timer: Any, steps: list[tuple[IntArray, IntArray]]) -> float:
    """When the last of a static batch's prefill steps (new, context) is back, from time 0:
    with one stage the steps' sum, one after another; with ``pp`` stages they go in flight
    together (``queued_backs``: every step holds a prompt's next chunk or other prompts)."""
    tokens = max((int(new.sum()) for new, _ in steps), default=1)
    sp = split(timer, min(tokens, TABLE_CAP))  # the hop past TABLE_CAP: at's line
    if sp is None:
        total = 0.0
        for new, ctx in steps:
            total += timer.step_time_s(new, ctx)
        return total
    backs = queued_backs(sp, ((float(timer.step_time_s(n, c)), n, c) for n, c in steps))
    return backs[-1] if backs else 0.0
