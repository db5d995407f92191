"""The loop's lean-step mixin: decoders as a cohort of sums, the tail and admissions in
plain Python, one ``step_time_agg`` call (see lean.py for the rules and when it hands over)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvplan.sim.blocks import BlockPool, KvShape
from kvplan.sim.lean import Cohort, cohort_from_state
from kvplan.sim.result import IntArray
from kvplan.sim.scheduler import Limits, Scheduler, StepPlan
from kvplan.sim.series import StepSeries
from kvplan.sim.state import SimState

_NO_ADMISSION = StepPlan()  # shared and never written: admit_waiting is not called with it
_RUN_MIN = 12
"""Shortest decode run worth numpy's per-call cost; shorter ones go step by step (exact both)."""


class LeanStep:
    """Lean general steps; the loop class provides the state and the hooks below."""

    s: SimState
    timer: Any
    shape: KvShape
    limits: Limits
    pool: BlockPool
    sched: Scheduler
    series: StepSeries
    steady: bool
    blocked: bool
    prefill_blocks: int
    decode_blocks: int
    cohort: Cohort | None
    tail: int | None
    ahead_after: int
    ahead_at: float
    validate: bool

    if TYPE_CHECKING:  # hooks the simulator loop (simulator._Loop) implements
        def _finish(self, fin: IntArray, end: float) -> bool: ...
        def _admission_possible(self) -> bool: ...
        def _run_lookups(self, first_tokens: bool) -> tuple[int, int, int] | None: ...
        def _count_lookups(self, look: tuple[int, int, int], k: int) -> None: ...
        def _next_arrival(self) -> float: ...
        def _run_times(self, dur: np.ndarray) -> np.ndarray: ...
        def _account(self, plan: StepPlan) -> None: ...

    # ------------------------------------------------------------ cohort upkeep

    def _lean_ready(self) -> bool:
        """The cohort is current (built from the arrays after a general step); False when
        the running list has another shape."""
        if self.cohort is None:
            got = cohort_from_state(self.s, self.shape.block_size)
            if got is None:
                return False
            self.cohort, self.tail = got
        return True

    def _lean_sync(self) -> None:
        """Make the per-request arrays true for every decoder (the cohort stays)."""
        c = self.cohort
        if c is not None and c.n:
            c.materialize(self.s, c.members(self.s.running), self.s.step)

    def _lean_drop(self) -> None:
        self._lean_sync()
        self.cohort = None
        self.tail = None

    # ------------------------------------------------------------ one step

    def _lean_step(self) -> bool:
        """One general step on the cohort; False (nothing changed) if it must hand over."""
        s, c = self.s, self.cohort
        assert c is not None
        budget = self.limits.max_num_batched_tokens - c.n
        b = self.shape.block_size
        need = c.hist[-s.step % b]
        tail, new_t, need_t, c_t, left_t = self.tail, 0, 0, 0, 0
        if tail is None and not (s.waiting and budget > 0
                                 and len(s.running) < self.limits.max_num_seqs):
            return budget >= 0 and self._lean_decode(need)
        if tail is not None:
            c_t = int(s.computed[tail])
            left_t = int(s.prompt[tail] + s.generated[tail]) - c_t
            if budget > 0:
                new_t = min(left_t, budget)
                need_t = (c_t + new_t + b - 1) // b - int(s.held[tail])
        if budget < 0 or need + need_t > self.pool.free or (c.n == 0 and new_t == 0
                                                             and not s.waiting):
            return False
        self.pool.take(need + need_t)
        self.decode_blocks += need
        if new_t:
            self._tail_chunk(tail, c_t, new_t, need_t, left_t)
        plan = _NO_ADMISSION
        if s.waiting and budget > new_t and len(s.running) < self.limits.max_num_seqs:
            plan = StepPlan()
            self.sched.admit_waiting(plan, budget - new_t)
        if c.n == 0 and new_t == 0 and not plan.ids:
            self.pool.give_anon(need + need_t)  # nothing to run: cannot happen, hand over
            return False
        self._lean_run(plan, tail if new_t else None, c_t, new_t)
        return True

    def _lean_decode(self, need: int) -> bool:
        """Steps of decoders only (no tail, no admission tried): the sums and nothing else.
        Goes on while the next turn would be one too (no arrival due, no admission to try,
        no decode run worth trying, blocks for the decoders), so a turn may hold several."""
        s, c, pool = self.s, self.cohort, self.pool
        assert c is not None
        if c.n == 0 or need > pool.free:
            return False
        b, bpt = self.shape.block_size, self.shape.groups[0].bytes_per_token
        budget, seqs = self.limits.max_num_batched_tokens, self.limits.max_num_seqs
        while True:
            n, t = c.n, s.step
            pool.take(need)
            self.decode_blocks += need
            ctx = c.s + n * t
            start = s.clock
            end = start + float(self.timer.step_time_agg(n, n, ctx, ctx + n, False))
            self.series.add(start, end, pool.used, bpt * (ctx + n), len(s.running),
                            len(s.waiting), n)
            fin = c.finishing(t)
            if fin:
                ids = np.array(fin, dtype=np.int64)
                c.materialize(s, ids, t + 1)
                self._finish(ids, end)
            s.clock = end
            s.step = t + 1
            if (self.validate or c.n == 0 or end >= self._next_arrival()
                    or (s.waiting and budget > c.n and len(s.running) < seqs)
                    or (s.step > self.ahead_after and end >= self.ahead_at)):
                break
            need = c.hist[-s.step % b]
            if need > pool.free:
                break
        self.blocked = False
        self.steady = True
        return True

    def _tail_chunk(self, tail: Any, c_t: int, new_t: int, need_t: int, left_t: int) -> None:
        s = self.s
        if left_t > 1:
            self.prefill_blocks += need_t
        else:
            self.decode_blocks += need_t
        s.computed[tail] = c_t + new_t
        s.held[tail] += need_t
        self.sched.register(tail, c_t + new_t)

    def _lean_run(self, plan: StepPlan, tail: int | None, c_t: int, new_t: int) -> None:
        """Price, record and finish the step planned on the cohort (+ tail, + admitted)."""
        s, c = self.s, self.cohort
        assert c is not None
        n, step = c.n, s.step
        ctx_dec = c.s + n * step
        tokens, ctx, pairs, pre = n + new_t, ctx_dec + c_t * (new_t > 0), ctx_dec + n, False
        if new_t:
            pairs += new_t * c_t + new_t * (new_t + 1) // 2
            pre = new_t > 1 or c_t == 0
        held = ctx_dec + n + c_t + new_t
        for r, new, x in zip(plan.ids, plan.new, plan.ctx, strict=True):
            tokens += new
            ctx += x
            pairs += new * x + new * (new + 1) // 2
            pre = pre or new > 1 or x == 0
            held += x + new
            s.computed[r] = x + new
        reqs = n + (new_t > 0) + len(plan.ids)
        dur = float(self.timer.step_time_agg(tokens, reqs, ctx, pairs, pre))
        start, end = s.clock, s.clock + dur
        self.series.add(start, end, self.pool.used,
                        self.shape.groups[0].bytes_per_token * held, len(s.running),
                        len(s.waiting), tokens)
        self._account(plan)
        finished = self._lean_emit(plan, tail, end)
        s.clock = end
        s.step += 1
        self.blocked = plan.head_blocked and not finished
        self.steady = self.tail is None

    def _lean_emit(self, plan: StepPlan, tail: int | None, end: float) -> bool:
        """Every decoder samples; the tail and admitted ones that caught up sample too.
        Returns whether any request finished."""
        s, c = self.s, self.cohort
        assert c is not None
        step = s.step
        fin = c.finishing(step)
        if fin:
            c.materialize(s, np.array(fin, dtype=np.int64), step + 1)
        caught = [tail] if tail is not None else []
        caught += plan.ids
        for r in caught:
            if int(s.computed[r]) != int(s.prompt[r] + s.generated[r]):
                self.tail = r  # a partial prefill: the last one scheduled
                continue
            if r == self.tail:
                self.tail = None
            gen = int(s.generated[r]) + 1
            s.generated[r] = gen
            if gen == 1:
                s.first_token_s[r] = end
            s.emit(r, step)
            if gen == int(s.output[r]):
                fin.append(r)
            else:
                c.join(r, int(s.computed[r]), gen, step + 1, int(s.output[r]))
        return self._finish(np.array(fin, dtype=np.int64), end) if fin else False

    # ------------------------------------------------------------ decode runs

    def _lean_run_ahead(self) -> bool:
        """k pure-decode steps of the cohort at once (fastpath.py's rules on the sums).

        Runs shorter than _RUN_MIN steps go step by step; ahead_after / ahead_at remember
        until when no run can be long (a heuristic: both ways give the same result)."""
        s, c = self.s, self.cohort
        assert c is not None
        n = c.n
        if (not self.steady or self.tail is not None or n == 0
                or n > self.limits.max_num_batched_tokens or self._admission_possible()):
            return False
        look = self._run_lookups(False)  # decoders have sampled: none caches a block
        if look is None:
            return False
        t = s.step
        k = k_fin = c.next_finish() - t + 1
        if k < _RUN_MIN:  # and still at every step up to that finish
            self.ahead_after = t + k - 1
            return False
        nxt = self._next_arrival()
        if nxt - s.clock < _RUN_MIN * float(
                self.timer.step_time_agg(n, n, c.s + n * t, c.s + n * t + n, False)):
            self.ahead_at = nxt  # a heuristic (the result is the same either way)
            return False
        times = self._run_times(self.timer.decode_run_agg(n, c.s + n * t, k))
        k = min(k, max(1, int(np.searchsorted(times[:k], self._next_arrival(), side="left"))))
        b = self.shape.block_size
        need = np.add.accumulate(np.array(c.hist)[(-(t + np.arange(k))) % b])
        if int(need[-1]) > look[2]:  # room: the pool's free blocks or fewer (fastpath.py)
            k = int(np.flatnonzero(need > look[2])[0])
            if k == 0:
                return False
            need = need[:k]
        self._count_lookups(look, k)
        self._lean_apply_run(need, times[:k + 1], k == k_fin)
        return True

    def _lean_apply_run(self, need: IntArray, times: np.ndarray, finishing: bool) -> None:
        s, c = self.s, self.cohort
        assert c is not None
        k, n, t = len(need), c.n, s.step
        grow = int(need[-1])
        used0 = self.pool.used
        self.pool.take(grow)
        self.decode_blocks += grow
        bpt = self.shape.groups[0].bytes_per_token
        logical = bpt * (c.s + n * t) + (bpt * n) * np.arange(1, k + 1, dtype=np.int64)
        self.series.add_run(times, used0 + need, logical, n, len(s.waiting))
        s.step += k
        end = float(times[-1])
        s.clock = end
        if finishing:
            fin = np.array(c.finishing(t + k - 1), dtype=np.int64)
            c.materialize(s, fin, t + k)
            if self._finish(fin, end):
                self.blocked = False
