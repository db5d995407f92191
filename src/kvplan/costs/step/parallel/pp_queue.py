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

from kvplan.costs.step.batch import FloatArray, IntArray
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




def queued_batch_s(timer: Any, shape: Any, steps: list[tuple[IntArray, IntArray]],
                   budget: int | None) -> tuple[float, float] | None:
    """(TTFT, E2E) of a static batch (a latency.RequestShape) whose prefill takes several
    batches under pp stages: vLLM's batch queue decodes the requests in the groups their
    prompts completed in, those groups in flight together (``StaticQueue``); None where one
    batch at a time runs it (one stage, or one prefill batch: every decode step holds all B)."""
    b, p, o = shape.batch, shape.prompt_tokens, shape.output_tokens
    if len(steps) < 2 or b < 2:
        return None
    sp = split(timer, min(max(int(new.sum()) for new, _ in steps), TABLE_CAP))
    return None if sp is None else StaticQueue(timer, sp, (b, p, o), budget or b * p).run()

class StaticQueue:
    """A static batch (B alike requests of prompt P and O outputs, all at t = 0, KV for all)
    run by ``step_with_batch_queue`` with ``sp.pp`` batches in flight, as the simulator's
    pipeline (``kvplan.sim.pipeline``) and vLLM 0.11's scheduler run it: each batch takes the
    running requests in order, skipping those whose last token is in flight (nothing new to
    compute), then the waiting prompts, up to ``budget`` tokens (a prompt may be cut); a
    request samples a token when the batch that caught it up is back. Requests whose prompts
    completed in different batches keep decoding in different batches, so the decode runs in
    up to ``pp`` groups that overlap in the pipeline (one batch of all B when the prefill took
    one batch)."""

    def __init__(self, timer: Any, sp: Split, shape: tuple[int, int, int], budget: int) -> None:
        batch, self.prompt, self.output = shape
        self.timer, self.sp, self.budget = timer, sp, budget
        self.computed = np.zeros(batch, dtype=np.int64)
        self.generated = np.zeros(batch, dtype=np.int64)
        self.flying = np.zeros(batch, dtype=bool)
        self.done = np.zeros(batch, dtype=bool)
        self.first = np.zeros(batch)
        self.finish = np.zeros(batch)
        self.free, self.clock = sp.idle(), 0.0
        self.steady = batch <= budget
        """Price the decode group by group once every request has its first token (no
        decode batch is ever cut: the budget holds all B); False: batch by batch (tests)."""
        self.queue: deque[tuple[IntArray | None, float]] = deque()
        """Queued batches: the requests each catches up (None: an empty batch), when back."""

    def run(self) -> tuple[float, float]:
        """(the last first token, the last finish) in seconds from t = 0."""
        while not self.done.all() or self.queue:
            if self.steady and self.generated.min() >= 1:
                return float(self.first.max()), self._steady()
            if not self.done.all():
                b = self._schedule()
                self.queue.append(b)
                if b[0] is not None and len(self.queue) < self.sp.pp \
                        and self.queue[0][1] > self.clock:
                    continue
            caught, back = self.queue.popleft()
            self.clock = max(self.clock, back)
            if caught is not None:
                self._apply(caught, back)
        return float(self.first.max()), float(self.finish.max())

    def _schedule(self) -> tuple[IntArray | None, float]:
        """The next batch: the requests it catches up and when it is back."""
        need = np.where(self.done | self.flying, 0, self.prompt + self.generated - self.computed)
        before = np.cumsum(need) - need  # request order: running first, then waiting
        new = np.minimum(need, np.maximum(self.budget - before, 0))
        ids = np.flatnonzero(new)
        if len(ids) == 0:  # back when the batches queued before it are
            return None, max(self.clock, self.queue[-1][1] if self.queue else self.clock)
        ctx, n = self.computed[ids], new[ids]
        self.computed[ids] += n
        caught = ids[self.computed[ids] == self.prompt + self.generated[ids]]
        self.flying[caught] = True
        step_s = float(self.timer.step_time_s(n, ctx))
        self.free = pass_stages(self.free, self.clock, *self.sp.parts(step_s, n, ctx))
        return caught, self.free[-1]

    def _apply(self, caught: IntArray, back: float) -> None:
        """The batch is back: the requests it caught up sample a token."""
        self.flying[caught] = False
        self.generated[caught] += 1
        self.first[caught[self.generated[caught] == 1]] = back
        end = caught[self.generated[caught] == self.output]
        self.finish[end], self.done[end] = back, True

    def _steady(self) -> float:
        """The last finish, once every request has its first token and no decode batch is
        cut: the requests go in fixed groups (those not in flight, then each queued batch's),
        each decoding together, so each group's steps are priced at once (``decode_run_s``)
        and the queue runs on plain floats. Returns the last finish."""
        groups: list[IntArray] = []
        queue: deque[tuple[int, float]] = deque()
        idle = np.flatnonzero(~self.flying & ~self.done)
        if len(idle):
            groups.append(idle)
        for caught, back in self.queue:
            if caught is not None and len(caught):
                groups.append(caught)
            queue.append((len(groups) - 1 if caught is not None and len(caught) else -1, back))
        flying = [k > 0 or not len(idle) for k in range(len(groups))]
        # tokens each member is still to sample; a queued group's next one is in flight
        todo = [self.output - self.generated[g] - int(f)
                for g, f in zip(groups, flying, strict=True)]
        parts = [self._decode_parts(g, t) for g, t in zip(groups, todo, strict=True)]
        left = [int(t.max()) for t in todo]  # batches each group is still to schedule
        step = [0] * len(groups)
        free, clock, last = self.free, self.clock, self.clock
        while any(left) or queue:
            if any(left) or any(flying):
                g = next((k for k in range(len(groups)) if left[k] and not flying[k]), -1)
                if g >= 0:
                    host, hop, stage = (float(a[step[g]]) for a in parts[g])
                    free = pass_stages(free, clock, host, hop, stage)
                    queue.append((g, free[-1]))
                    flying[g], step[g], left[g] = True, step[g] + 1, left[g] - 1
                    if len(queue) < self.sp.pp and queue[0][1] > clock:
                        continue
                else:
                    queue.append((-1, max(clock, queue[-1][1] if queue else clock)))
            g, back = queue.popleft()
            clock = max(clock, back)
            if g >= 0:
                flying[g] = False
                last = max(last, back)
        return last

    def _decode_parts(self, group: IntArray, todo: IntArray
                      ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(host, hop, stage) of each of a group's decode batches still to schedule (``todo``
        a member): its members decode together, each until its last token (members caught up
        in one batch may have different token counts: a first token beside decodes)."""
        host, hop, stage = [], [], []
        start = 0
        for end in np.unique(todo[todo > 0]).tolist():
            members = group[todo > start]
            ctx = self.computed[members] + start
            steps = np.asarray(self.timer.decode_run_s(ctx, end - start), dtype=np.float64)
            h, p, _ = self.sp.parts(float(steps[0]), np.ones(len(members), dtype=np.int64), ctx)
            host.append(np.full(len(steps), h))
            hop.append(np.full(len(steps), p))
            stage.append((steps - h - (self.sp.pp - 1) * p) / self.sp.pp)
            start = end
        if not host:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        return np.concatenate(host), np.concatenate(hop), np.concatenate(stage)
