"""simulate(): a continuous-batching vLLM v1 server replayed step by step over a workload.

Each loop turn either runs one general step (scheduler.py), or, when nothing can change but
tokens, fast-forwards k identical pure-decode steps at once (fastpath.py).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np

from kvplan.costs.step.batch import StepTimer, idle_timer
from kvplan.costs.step.parallel import pp_queue
from kvplan.errors import InputError
from kvplan.sim import core, pipeline
from kvplan.sim.blocks import BlockPool, KvShape
from kvplan.sim.books import check_books
from kvplan.sim.fastpath import FastForward
from kvplan.sim.frontend import FrontEnd, plan_front_end, refusal_times
from kvplan.sim.inputs import check_arrivals, check_pool, kv_shape, note_unmodelled_hits
from kvplan.sim.lean import Cohort
from kvplan.sim.lean_step import LeanStep
from kvplan.sim.rejects import reject_reasons
from kvplan.sim.result import IntArray, KvSeries, SimulationResult
from kvplan.sim.scheduler import Limits, Scheduler, StepPlan, default_limits
from kvplan.sim.series import StepSeries
from kvplan.sim.state import FINISHED, REJECTED, WAITING, SimState, WorkloadLike, new_state
from kvplan.specs.kv import ModelKv
from kvplan.specs.serving import EngineConfig

_sum, _min, _max = np.add.reduce, np.minimum.reduce, np.maximum.reduce  # no Python wrappers


def simulate(
    workload: WorkloadLike,
    *,
    timer: StepTimer,
    num_blocks: int,
    block_size: int | None = None,
    engine: EngineConfig | None = None,
    kv: ModelKv | KvShape | None = None,
    limits: Limits | None = None,
    max_model_len: int | None = None,
    shared_prefix_tokens: int = 0,
    fast: bool = True,
    progress: Callable[[int, int], None] | None = None,
    validate: bool = False,
) -> SimulationResult:
    """Replay ``workload`` on a vLLM v1 server with a pool of ``num_blocks`` KV blocks.

    ``kv`` says how many pool blocks a request holding t tokens takes (default: one
    full-attention group, cdiv(t, block_size)) and its logical bytes. ``shared_prefix_tokens``
    gives every prompt the same first tokens (vllm bench ``--random-prefix-len``) for prefix
    caching when the workload has no prefix hashes. ``fast=False`` runs every step through
    the general scheduler (slow; the reference the fast path is tested against).
    ``validate`` checks the block pool's books after every loop turn (tests).

    ``num_blocks`` is vLLM's ``num_gpu_blocks``; one of them is vLLM's null block (taken from
    the free queue when the pool is built, never allocated), so requests share
    ``num_blocks - 1``.
    """
    engine = engine or EngineConfig()
    b = engine.block_size if block_size is None else block_size
    if engine.data_parallel_size > 1:  # one scheduler here; DP ranks are dp of them
        raise InputError("simulate runs one engine: --data-parallel-size "
                         f"{engine.data_parallel_size} runs in sim.dp.lockstep.simulate_dp "
                         "(simulate_serving picks it)")
    check_pool(num_blocks, b)
    check_arrivals(workload, in_order=bool(workload.closed_loop_concurrency))
    shape = kv_shape(kv, b)
    lim = limits or default_limits(engine)
    fast = fast and not lim.prefill_first  # SGLang's policy: the general scheduler only
    mml = max_model_len if max_model_len is not None else engine.max_model_len
    note_unmodelled_hits(shape, lim, workload, shared_prefix_tokens)
    loop = _Loop(workload=workload, timer=timer, shape=shape, limits=lim, num_blocks=num_blocks,
                 max_model_len=mml, shared_prefix_tokens=shared_prefix_tokens, fast=fast,
                 progress=progress)
    loop.validate = validate
    sp = pp_queue.split(timer, core.token_budget(loop))  # pp > 1: batches in flight
    return loop.run() if sp is None else pipeline.run(loop, sp)


class _Loop(FastForward, LeanStep):
    """The simulation loop: releases arrivals, runs general steps or fast-forwards."""

    def __init__(self, *, workload: WorkloadLike, timer: StepTimer, shape: KvShape,
                 limits: Limits, num_blocks: int, max_model_len: int | None,
                 shared_prefix_tokens: int, fast: bool,
                 progress: Callable[[int, int], None] | None) -> None:
        self.s: SimState = new_state(workload, shape.block_size, shared_prefix_tokens)
        self.timer = timer
        self.idle_timer = idle_timer(timer)
        self.idle = True
        """The engine is idle (nothing ran since it last had no request): the next step's
        host work has no step before it to hide under (async scheduling; batch.idle_timer)."""
        self.shape = shape
        self.limits = limits
        self.pool = BlockPool(num_blocks - 1)  # vLLM's BlockPool keeps one as the null block
        self.sched = Scheduler(self.s, self.pool, shape, limits)
        self.fast = fast
        self.progress = progress
        self.series = StepSeries()
        self.ptr = 0
        self.done = 0
        self.blocked = False
        self.query_tokens = self.lookup_hits = 0
        self.prefill_blocks = 0
        self.admission_peak = 0
        """A decode instance's most blocks in use right after admitting a transfer."""
        self.decode_blocks = 0
        n = len(self.s.arrival)
        conc = workload.closed_loop_concurrency
        self.slots: list[float] | None = [0.0] * min(conc, n) if conc else None
        g = shape.groups
        self.simple = len(g) == 1 and g[0].kind == "full" and g[0].weight == 1
        self.steady = False
        self.validate = False
        # the lean step keeps at most one partial prefill (the tail); a long-prefill cap
        # can leave several, so it runs the array paths
        self.lean = (fast and self.simple and not limits.long_prefill_token_threshold
                     and bool(getattr(timer, "supports_aggregates", False)))
        self.cohort: Cohort | None = None
        self.tail: int | None = None
        self.ahead_after, self.ahead_at = -1, 0.0  # no decode run is long before these
        self._step_no: IntArray = np.zeros(0, dtype=np.int64)
        self._opens: IntArray = np.zeros(0, dtype=np.int64)
        self._claimed: IntArray = np.zeros(0, dtype=np.int64)
        self.reasons = reject_reasons(self.s, shape, limits, num_blocks - 1, max_model_len)
        self._api_setup(timer)
        self.next_s = self.next_send = math.inf
        self._update_next()

    # ------------------------------------------------------------ arrivals

    def _next_arrival(self) -> float:
        """When the next request is sent (cached: it changes only in _release and _slot_free)."""
        return self.next_s

    def _api_setup(self, timer: StepTimer) -> None:
        """A request reaches the engine after the API server's path (sim.frontend: its one
        FIFO process, then the parallel delay). Open loop: requests reach the engine in order
        of that arrival (FCFS); closed loop: in send order, as slots free."""
        fe = plan_front_end(timer, self.s.arrival, self.s.prompt, self.slots is not None)
        self.delay, self.admit, self.order, self.arrivals = (fe.delay, fe.admit, fe.order,
                                                             fe.arrivals)
        self.api_free = 0.0  # closed loop: when the API server's process is next idle

    def _update_next(self) -> None:
        if self.ptr >= len(self.arrivals):
            self.next_s = self.next_send = math.inf
            return
        a = self.arrivals[self.ptr]
        if self.slots is None:
            self.next_s = a
            self.next_send = a if self.order is None else float(
                self.s.arrival[self.order[self.ptr]])
            return
        self.next_send = max(a, self.slots[0]) if self.slots else math.inf
        gate = self.api_free if self.api_free > self.next_send else self.next_send
        self.next_s = ((gate + self.admit[self.ptr]) if self.admit else gate) + (
            self.delay[self.ptr] if self.delay else 0.0)

    def _release(self) -> None:
        """Requests that reached the engine by the clock's time join WAITING (or are rejected
        at once); ``sent_s`` is when the client sent them."""
        s = self.s
        while (t := self.next_s) <= s.clock:
            i = self.ptr if self.order is None else self.order[self.ptr]
            sent = self.next_send
            if self.slots is not None:  # the API server admits it (closed loop: online)
                gate = self.api_free if self.api_free > sent else sent
                self.api_free = (gate + self.admit[self.ptr]) if self.admit else gate
            self.ptr += 1
            if self.slots is not None:
                heapq.heappop(self.slots)
            self._update_next()
            s.sent_s[i] = sent
            if i in self.reasons:
                s.status[i] = REJECTED
                s.reject_reason[i] = self.reasons[i]
                self._slot_free(t)
                self.done += 1
            else:
                s.status[i] = WAITING
                s.waiting.append(i)

    def _slot_free(self, t: float) -> None:
        if self.slots is not None:
            heapq.heappush(self.slots, t)
            self._update_next()

    # ------------------------------------------------------------ loop

    def run(self) -> SimulationResult:
        picked = core.pick(self)
        if picked is not None:
            return core.run(self, *picked)
        s = self.s
        n = len(s.arrival)
        turns = shown = 0
        while True:
            self.idle |= not s.running and not s.waiting  # the last step left nothing to run
            self._release()
            if not s.running and not s.waiting:
                t = self._next_arrival()
                if t == math.inf:
                    break
                s.clock = max(s.clock, t)
                self.blocked = False
                continue
            self._turn()
            turns += 1
            # every 4096 turns or engine steps (a turn may run many steps): callers stop a
            # simulation from here (the web page's cancel and wall-time limit)
            if self.progress is not None and (turns % 4096 == 0 or s.step - shown >= 4096):
                shown = s.step
                self.progress(self.done, n)
        if self.progress is not None:
            self.progress(self.done, n)
        return self._result()

    def _turn(self) -> None:
        """One turn: a lean step or run, a fast-forwarded decode run, or a general step (the
        step after an idle spell: the general step, priced by the idle timer)."""
        if self.idle and self.idle_timer is not self.timer:
            if self.lean:
                self._lean_drop()
            self._general_step()
        elif self.lean:
            if not self._lean_turn():
                self._lean_drop()
                self._general_step()
        elif not (self.fast and self._fast_forward()):
            self._general_step()
        if self.validate:
            self._lean_sync()
            check_books(self.s, self.pool)

    def _lean_turn(self) -> bool:
        """A fast-forwarded run or a lean step; False if the general step must run."""
        if self.cohort is None and not self._lean_ready():
            return False
        s = self.s
        if s.step > self.ahead_after and s.clock >= self.ahead_at and self._lean_run_ahead():
            return True
        return self._lean_step()

    def _general_step(self) -> None:
        s = self.s
        plan = self.sched.plan()
        if not plan.ids:
            self._no_step(plan)
            return
        ids = np.array(plan.ids, dtype=np.int64)
        new = np.array(plan.new, dtype=np.int64)
        ctx = np.array(plan.ctx, dtype=np.int64)
        dur = float((self.idle_timer if self.idle else self.timer).step_time_s(new, ctx))
        self._apply_step(plan, ids, new, ctx, s.clock, s.clock + dur)

    def _apply_step(self, plan: StepPlan, ids: IntArray, new: IntArray, ctx: IntArray,
                    start: float, end: float) -> None:
        """The planned step ran from ``start`` to ``end``: tokens computed, a token sampled
        where a request caught up, records (a DP rank's lockstep step: sim/dp/)."""
        s = self.s
        done = ctx + new
        s.computed[ids] = done
        whole = len(ids) == len(s.running)  # every running request was scheduled
        self._record(start, end, self._logical(done if whole else None), int(_sum(new)))
        self._account(plan)
        tot = s.prompt[ids] + s.generated[ids]
        finished = self._emit(ids, tot == done, end)
        # Steady candidates: every running request now has exactly one token to compute
        # (a scheduled one has tot - done left, or 1 once it sampled at tot == done).
        self.steady = int(_max(tot - done)) <= 1 if whole else self._one_left_each()
        s.clock = end
        s.step += 1
        self.idle = False
        self.blocked = plan.head_blocked and not finished and not plan.preempted

    def _no_step(self, plan: StepPlan) -> None:
        """Nothing was scheduled: only preemptions happened (the next turn schedules what is
        left). A disaggregated instance overrides it (sim/disagg/instances.py)."""
        assert plan.preempted, "scheduler made no progress"
        self.blocked = False
        self.steady = False

    def _logical(self, held: IntArray | None) -> int:
        """Logical KV bytes of the running requests (``held``: their computed tokens)."""
        if held is None:
            held = self.s.computed[np.array(self.s.running, dtype=np.int64)]
        if self.simple:
            return self.shape.groups[0].bytes_per_token * int(_sum(held))
        return int(_sum(self.shape.logical_bytes(held)))

    def _one_left_each(self) -> bool:
        s = self.s
        run_ids = np.array(s.running, dtype=np.int64)
        left = s.prompt[run_ids] + s.generated[run_ids] - s.computed[run_ids]
        return bool(np.all(left == 1))

    def _record(self, start: float, end: float, logical: int, new_tokens: int) -> None:
        self.series.add(start, end, self.pool.used, logical, len(self.s.running),
                        len(self.s.waiting), new_tokens)

    def _account(self, plan: StepPlan) -> None:
        self.query_tokens += plan.query_tokens
        self.lookup_hits += plan.hit_tokens
        self.prefill_blocks += plan.prefill_blocks
        self.decode_blocks += plan.decode_blocks

    def _emit(self, ids: IntArray, caught_up: np.ndarray, end: float) -> bool:
        """Requests that caught up sample a token at ``end``; returns whether any finished."""
        s = self.s
        em = ids[caught_up]
        if len(em) == 0:
            return False
        gen = s.generated[em] + 1
        s.generated[em] = gen
        if int(_min(s.last_emit[em])) != s.step - 1:  # some start a new emission run
            self._segments(em, s.step, s.step)
        else:
            s.last_emit[em] = s.step
        if int(_min(gen)) == 1:
            s.first_token_s[em[gen == 1]] = end
        return self._finish(em[gen == s.output[em]], end)

    def _segments(self, ids: IntArray, first_step: int, last_step: int) -> None:
        """ids sampled a token at every step in [first_step, last_step]."""
        s = self.s
        for r in ids[s.last_emit[ids] != first_step - 1].tolist():
            s.close_segment(r)
            s.seg_start[r] = first_step
        s.last_emit[ids] = last_step

    def _finish(self, fin: IntArray, end: float) -> bool:
        if len(fin) == 0:
            return False
        for r in fin.tolist():
            self.sched.free(r, keep_own=False)
            self._slot_free(end)
        self._close(fin, end)
        return True

    def _close(self, fin: IntArray, end: float) -> list[int]:
        """``fin`` finished at ``end``: out of the running list, blocks untouched (freeing
        is the caller's: a disaggregated prefill instance holds them until the transfer)."""
        s = self.s
        gone: list[int] = fin.tolist()
        if self.cohort is not None:
            for r in gone:
                self.cohort.leave(r)
        for r in gone:
            s.close_segment(r)
        s.status[fin] = FINISHED
        s.finish_s[fin] = end
        self.done += len(gone)
        out = set(gone)
        s.running = [r for r in s.running if r not in out]
        return gone

    # ------------------------------------------------------------ result

    def _result(self) -> SimulationResult:
        s = self.s
        for r in np.flatnonzero(s.last_emit >= 0).tolist():
            s.close_segment(r)
        segs = (np.array(s.seg_req, dtype=np.int64), np.array(s.seg_first, dtype=np.int64),
                np.array(s.seg_last, dtype=np.int64))
        return self._package(self.series.build(), segs,
                             np.array(s.preempt_steps, dtype=np.int64))

    def _package(self, steps: KvSeries, segs: tuple[IntArray, IntArray, IntArray],
                 preempt_steps: IntArray) -> SimulationResult:
        """The result from the state, the step series and the emission runs (either loop)."""
        s = self.s
        return SimulationResult(
            arrival_s=s.arrival, sent_s=s.sent_s, scheduled_s=s.scheduled_s,
            first_token_s=s.first_token_s, finish_s=s.finish_s, prompt_tokens=s.prompt,
            output_tokens=s.output, preemptions=s.preemptions, prefix_hit_tokens=s.hit_tokens,
            finished=s.status == FINISHED, rejected=dict(s.reject_reason),
            steps=steps, preemption_s=steps.start_s[preempt_steps],
            seg_req=segs[0], seg_first=segs[1], seg_last=segs[2],
            num_blocks=self.pool.num_blocks + 1, block_size=self.shape.block_size,
            prefill_claimed_blocks=self.prefill_blocks, decode_claimed_blocks=self.decode_blocks,
            prefix_query_tokens=self.query_tokens, prefix_lookup_hits=self.lookup_hits,
            admission_peak_blocks=self.admission_peak, failed_s=refusal_times(
                FrontEnd(self.delay, self.admit, self.order, self.arrivals), s.sent_s,
                s.reject_reason, self.slots is not None))
