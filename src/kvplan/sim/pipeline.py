"""Pipeline parallelism with vLLM V1's batch queue: up to ``pp`` batches in flight.

vLLM 0.11 (``v1/engine/core.py`` ``step_with_batch_queue``, a queue of the executor's
``max_concurrent_batches`` = ``pipeline_parallel_size`` batches) runs one loop turn as:

    if requests are left: schedule a batch (possibly empty) and queue it;
        if it holds tokens, the queue is not full and the oldest batch is not back yet:
        end the turn (schedule another at once)
    block on the oldest batch; apply its outputs (tokens, finishes, frees)

The scheduler advances a request's computed tokens and allocates its blocks when it
schedules it; a running request whose last token is in flight has nothing new to compute
and is skipped, so the next batch is built from the other requests (waiting prompts, later
arrivals, the next chunk of a prompt). Tokens, finishes and frees happen when the batch's
result comes back. A request preempted while in flight gets no token from that batch (it
samples it again after its recompute; vLLM's update_from_output keeps it: docs/simulator.md,
*Simplifications*).

Timing: ``kvplan.costs.step.parallel.pp_queue`` (shared with `kvplan latency`'s static
batch): the step model prices a batch alone as ``host + stage + (pp - 1) x (stage + hop)``;
in flight the host runs one batch at a time and each stage holds one batch at a time
(``pass_stages``). The batch is back at its end on the last stage; a batch alone takes the
one-batch step time.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kvplan.costs.step.parallel.pp_queue import Split, pass_stages, split
from kvplan.sim.books import check_books
from kvplan.sim.result import BoolArray, IntArray, KvSeries, SimulationResult

if TYPE_CHECKING:
    from kvplan.sim.blocks import BlockPool
    from kvplan.sim.scheduler import Limits, Scheduler, StepPlan
    from kvplan.sim.series import StepSeries
    from kvplan.sim.state import SimState


class _Loop(Protocol):
    """What the pipelined loop uses of the simulator's loop (simulator._Loop)."""

    s: SimState
    timer: Any
    limits: Limits
    pool: BlockPool
    sched: Scheduler
    series: StepSeries
    validate: bool
    done: int
    progress: Callable[[int, int], None] | None

    def _release(self) -> None: ...
    def _next_arrival(self) -> float: ...
    def _logical(self, held: IntArray | None) -> int: ...
    def _account(self, plan: StepPlan) -> None: ...
    def _finish(self, fin: IntArray, end: float) -> bool: ...
    def _package(self, steps: KvSeries, segs: tuple[IntArray, IntArray, IntArray],
                 preempt_steps: IntArray) -> SimulationResult: ...


def busy_s(timer: Any, max_tokens: int) -> Callable[[IntArray, IntArray], float]:
    """Seconds a batch holds the busier of the host and a stage, max(host, stage) (the
    timer's step_time_s where it has one stage): each serves one batch at a time, so a
    loaded pipeline passes no more than a batch in that time, whatever the hops add to each
    batch's own trip (split into micro-batches, the host's and a stage's seconds do not
    shrink: each is a fixed part plus rates over tokens, requests and pairs; the planner's
    ceilings price it at a few batch shapes, as they price the step)."""
    sp = split(timer, max_tokens)
    step: Callable[[IntArray, IntArray], float] = timer.step_time_s
    if sp is None:
        return step

    def busy(new: IntArray, ctx: IntArray) -> float:
        host, _, stage = sp.parts(float(step(new, ctx)), new, ctx)
        return max(host, stage)

    return busy


@dataclass(slots=True)
class Batch:
    """One queued batch: its requests, which of them sample a token when it is back, their
    preemption counts when scheduled, its index in the step series (-1: empty) and when it
    is back."""

    ids: IntArray
    caught: BoolArray
    epoch: IntArray
    index: int
    back_s: float


class Pipeline:
    """The batch-queue loop over a simulator loop's scheduler, pool and records."""

    def __init__(self, loop: _Loop, sp: Split) -> None:
        self.loop, self.sp = loop, sp
        self.queue: deque[Batch] = deque()
        self.free = sp.idle()
        """When the host and each stage are next free (pp_queue.pass_stages)."""
        self.flying: set[int] = set()
        """Requests whose last token is in flight (nothing to compute until it is back)."""
        self.runs: list[tuple[IntArray, IntArray, IntArray]] = []
        """Closed emission runs (requests, first batches, last batches), a chunk a batch."""
        self.trace: list[tuple[list[int], float, float]] | None = None
        """When a list: (request ids, scheduled, back) of every non-empty batch (tests)."""

    def run(self) -> SimulationResult:
        lp, s = self.loop, self.loop.s
        n, turns = len(s.arrival), 0
        while True:
            lp._release()
            if not s.running and not s.waiting and not self.queue:
                t = lp._next_arrival()
                if t == math.inf:
                    break
                s.clock = max(s.clock, t)
                continue
            self._turn()
            turns += 1
            if lp.validate:
                check_books(s, lp.pool)
            if lp.progress is not None and turns % 256 == 0:  # the web page stops it here
                lp.progress(lp.done, n)
        if lp.progress is not None:
            lp.progress(lp.done, n)
        return self._result()

    def _turn(self) -> None:
        """One ``step_with_batch_queue`` call."""
        s = self.loop.s
        if s.running or s.waiting:
            b = self._schedule()
            self.queue.append(b)
            oldest = self.queue[0]
            if b.index >= 0 and len(self.queue) < self.sp.pp and oldest.back_s > s.clock:
                return
        oldest = self.queue.popleft()
        s.clock = max(s.clock, oldest.back_s)
        self._apply(oldest)

    def _schedule(self) -> Batch:
        """Schedule a batch at the clock's time: blocks and computed tokens now."""
        lp, s = self.loop, self.loop.s
        s.step = lp.series.n
        if not s.waiting and all(r in self.flying for r in s.running):
            return self._empty()  # every request's token is in flight (no plan to walk)
        plan = lp.sched.plan()
        new = np.array(plan.new, dtype=np.int64)
        keep = new > 0  # in flight: nothing new to compute (vLLM skips it)
        ids = np.array(plan.ids, dtype=np.int64)[keep]
        ctx = np.array(plan.ctx, dtype=np.int64)[keep]
        new = new[keep]
        lp._account(plan)
        if len(ids) == 0:
            return self._empty()
        done = ctx + new
        s.computed[ids] = done
        caught = s.prompt[ids] + s.generated[ids] == done
        self.flying.update(ids[caught].tolist())
        back = self._time(new, ctx)
        lp.series.add(s.clock, back, lp.pool.used, lp._logical(None), len(s.running),
                      len(s.waiting), int(new.sum()))
        if self.trace is not None:
            self.trace.append((ids.tolist(), s.clock, back))
        return Batch(ids, caught, s.preemptions[ids].copy(), lp.series.n - 1, back)

    def _empty(self) -> Batch:
        """An empty batch: back when the batches queued before it are."""
        s = self.loop.s
        last = self.queue[-1].back_s if self.queue else s.clock
        none = np.zeros(0, dtype=np.int64)
        return Batch(none, none > 0, none, -1, max(s.clock, last))

    def _time(self, new: IntArray, ctx: IntArray) -> float:
        """When a batch scheduled now is back (the host's and stages' clocks move on)."""
        step_s = float(self.loop.timer.step_time_s(new, ctx))
        self.free = pass_stages(self.free, self.loop.s.clock, *self.sp.parts(step_s, new, ctx))
        return self.free[-1]

    def _apply(self, b: Batch) -> None:
        """The batch is back: requests that caught up (and were not preempted since) sample
        a token; finished ones free their blocks."""
        if b.index < 0:
            return
        s = self.loop.s
        self.flying.difference_update(b.ids[b.caught].tolist())
        ok = b.caught & (s.preemptions[b.ids] == b.epoch)
        if ok.any():
            self._tokens(b.ids[ok], b.index, b.back_s)

    def _tokens(self, em: IntArray, index: int, end: float) -> None:
        """``em`` sample a token at batch ``index``'s end (simulator._Loop._emit, with the
        emission runs kept as arrays: in flight, a request samples every pp-th batch, so
        nearly every token starts a run of its own)."""
        s = self.loop.s
        gen = s.generated[em] + 1
        s.generated[em] = gen
        fresh = em[s.last_emit[em] != index - 1]
        closed = fresh[s.last_emit[fresh] >= 0]
        if len(closed):
            self.runs.append((closed, s.seg_start[closed], s.last_emit[closed]))
        s.seg_start[fresh] = index
        s.last_emit[em] = index
        s.first_token_s[em[gen == 1]] = end
        self.loop._finish(em[gen == s.output[em]], end)

    def _result(self) -> SimulationResult:
        """The loop's result, the emission runs by request, then first batch."""
        s = self.loop.s
        for r in np.flatnonzero(s.last_emit >= 0).tolist():
            s.close_segment(r)
        parts = [*self.runs, (np.array(s.seg_req, dtype=np.int64),
                              np.array(s.seg_first, dtype=np.int64),
                              np.array(s.seg_last, dtype=np.int64))]
        req, first, last = (np.concatenate([p[i] for p in parts]) for i in range(3))
        order = np.lexsort((first, req))
        return self.loop._package(self.loop.series.build(),
                                  (req[order], first[order], last[order]),
                                  np.array(s.preempt_steps, dtype=np.int64))


def run(loop: _Loop, sp: Split) -> SimulationResult:
    """The whole simulation with up to ``sp.pp`` batches in flight."""
    return Pipeline(loop, sp).run()
