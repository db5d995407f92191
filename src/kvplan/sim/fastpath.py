"""Fast-forwarding k identical pure-decode steps at once (the loop's mixin; see simulator.py).

    steady = every running request has exactly 1 token to compute
             and no waiting request can be admitted (none waiting, max_num_seqs reached,
             no token budget left, or the FCFS head did not get its blocks last step and
             nothing has been freed since)
    k = min(steps to the first finish, steps until the pool runs out at a block boundary,
            steps until the clock passes the next arrival)

The k steps are priced by timer.decode_run_s (equal to k step_time_s calls) and recorded
step by step, so the result is the one ``fast=False`` gives (tests prove it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kvplan.costs.step.batch import StepTimer
from kvplan.sim.blocks import BlockPool, KvShape
from kvplan.sim.result import IntArray
from kvplan.sim.scheduler import Limits, Scheduler
from kvplan.sim.series import StepSeries
from kvplan.sim.state import SimState

_sum, _min = np.add.reduce, np.minimum.reduce  # no Python wrappers
_FAST_CELLS = 1 << 20  # requests x steps evaluated per fast-forward (bounds memory)


class FastForward:
    """The fast path of the loop; the loop class provides the state and the hooks below."""

    s: SimState
    timer: StepTimer
    shape: KvShape
    limits: Limits
    pool: BlockPool
    sched: Scheduler
    series: StepSeries
    simple: bool
    steady: bool
    blocked: bool
    decode_blocks: int
    query_tokens: int
    lookup_hits: int
    _step_no: IntArray
    _opens: IntArray
    _claimed: IntArray
    """Blocks claimed by the end of each step of the run being tried (sliding windows)."""

    if TYPE_CHECKING:  # hooks the simulator loop (simulator._Loop) implements
        def _next_arrival(self) -> float: ...
        def _segments(self, ids: IntArray, first_step: int, last_step: int) -> None: ...
        def _finish(self, fin: IntArray, end: float) -> bool: ...

    def _admission_possible(self) -> bool:
        s = self.s
        if not s.waiting or self.blocked:
            return False
        n = len(s.running)
        return n < self.limits.max_num_seqs and n < self.limits.max_num_batched_tokens

    def _run_lookups(self, first_tokens: bool) -> tuple[int, int, int] | None:
        """(hits, queried tokens) one step of a decode run adds to the prefix-cache stats:
        a blocked FCFS head is looked up at every step (vLLM 0.11 counts each lookup), and
        the blocks the run may take before the head's hits change (blocked_lookup).
        None if the run must not start: its first step may cache a block the head hits
        (``first_tokens``: a request computes its last prompt token)."""
        s = self.s
        n = len(s.running)
        if not (self.blocked and s.waiting and n < self.limits.max_num_seqs
                and n < self.limits.max_num_batched_tokens):
            return 0, 0, self.pool.free
        if first_tokens and self.sched.caching:
            return None
        return self.sched.blocked_lookup()

    def _count_lookups(self, look: tuple[int, int, int], k: int) -> None:
        self.lookup_hits += k * look[0]
        self.query_tokens += k * look[1]

    def _fast_forward(self) -> bool:
        """Run k identical pure-decode steps at once; False if this step is not one."""
        s = self.s
        n = len(s.running)
        if not self.steady or n == 0 or n > self.limits.max_num_batched_tokens:
            return False
        if self._admission_possible():
            return False
        ids = np.array(s.running, dtype=np.int64)
        ctx, gen = s.computed[ids], s.generated[ids]
        look = self._run_lookups(int(_min(gen)) == 0)
        if look is None:
            return False
        left = s.output[ids] - gen
        k = k_fin = int(_min(left))
        if not self.simple:
            k = min(k, max(1, _FAST_CELLS // n))
        times = self._run_times(self.timer.decode_run_s(ctx, k))
        k = min(k, max(1, int(np.searchsorted(times[:k], self._next_arrival(), side="left"))))
        need, logical = self._run_blocks(ids, ctx, k)
        if not self.simple or int(need[-1]) > look[2]:  # room <= free (blocked_lookup)
            over = np.flatnonzero(need > look[2])
            if len(over):
                k = int(over[0])
                if k == 0:
                    return False
                need, logical = need[:k], logical[:k]
        if not self.simple and self.blocked and s.waiting:
            # Sliding windows free blocks in decode (a whole prefill chunk at the first
            # step): stop before the step whose running phase leaves the blocked head room.
            room = np.flatnonzero(self.pool.free - need >= self._head_need(n))
            if len(room):
                k = int(room[0])
                if k == 0:
                    return False
                need, logical = need[:k], logical[:k]
        self._count_lookups(look, k)
        self._apply_run(ids, ctx, gen, left if k == k_fin else None, need, logical,
                        times[:k + 1])
        return True

    def _head_need(self, n: int) -> int:
        """Blocks the FCFS head needs to be admitted after n running decodes (no prefix
        caching on these shapes); more than the pool when the token budget stops it first."""
        s = self.s
        r = s.waiting[0]
        total = self.limits.cap(int(s.prompt[r] + s.generated[r]))
        left = self.limits.max_num_batched_tokens - n
        if not self.limits.chunked_prefill and total > left:
            return self.pool.num_blocks + 1
        return self.shape.blocks_one(min(total, left), 0)

    def _run_times(self, dur: np.ndarray) -> np.ndarray:
        """Step boundaries of a run: the clock, then the clock after each step (added in turn)."""
        times = np.empty(len(dur) + 1)
        times[0] = self.s.clock
        times[1:] = dur
        return np.add.accumulate(times, out=times)  # in turn: bit-equal to clock += dur

    def _steps(self, k: int) -> tuple[IntArray, IntArray]:
        """(1..k, and the context residue mod B that opens a block at each of those steps)."""
        if k > len(self._step_no):
            self._step_no = np.arange(1, 2 * k + 1, dtype=np.int64)
            self._opens = (1 - self._step_no) % self.shape.block_size
        return self._step_no[:k], self._opens[:k]

    def _run_blocks(self, ids: IntArray, ctx: IntArray, k: int) -> tuple[IntArray, IntArray]:
        """Blocks added by the end of each of k decode steps, and logical bytes per step.

        One full-attention group: request r opens a block at step j when (ctx_r + j) % B == 1
        (mod B), so step j opens hist[(1 - j) % B] blocks with hist = bincount(ctx % B):
        O(n + k).
        """
        steps, opens = self._steps(k)
        if self.simple:
            b = self.shape.block_size
            need = np.add.accumulate(np.bincount(ctx % b, minlength=b)[opens])
            bpt = self.shape.groups[0].bytes_per_token
            return need, bpt * int(_sum(ctx)) + (bpt * len(ctx)) * steps
        tok = ctx[:, None] + steps[None, :]
        held = self.shape.blocks(tok)
        need = held.sum(axis=0) - int(self.s.held[ids].sum())
        # Within a step requests allocate (and sliding windows free) in running order, as
        # the general step does: step j fits if no prefix of its per-request changes takes
        # more than the blocks free before it. Report a misfit as need > free at step j.
        delta = np.diff(held, axis=1, prepend=self.s.held[ids][:, None])
        # blocks claimed by the end of each step: every request's growth (a general step
        # counts max(need, 0) per request; a window's frees do not offset another's claims)
        self._claimed = np.add.accumulate(np.maximum(delta, 0).sum(axis=0))
        before = np.concatenate(([0], need[:-1]))
        misfit = np.maximum.reduce(np.cumsum(delta, axis=0), axis=0) > self.pool.free - before
        need = np.where(misfit, self.pool.free + 1, need)
        return need, self.shape.logical_bytes(tok).sum(axis=0)

    def _apply_run(self, ids: IntArray, ctx: IntArray, gen: IntArray, left: IntArray | None,
                   need: IntArray, logical: IntArray, times: np.ndarray) -> None:
        """Record and apply k decode steps; ``left`` (tokens to go) when some finish at k."""
        s = self.s
        k = len(need)
        used0 = self.pool.used
        self._take_run_blocks(ids, ctx, k, int(need[-1]))
        self.series.add_run(times, used0 + need, logical, len(ids), len(s.waiting))
        s.computed[ids] = ctx + k
        s.generated[ids] = gen + k
        if int(_min(gen)) == 0:
            self._first_tokens(ids[gen == 0], float(times[1]))
        self._run_segments(ids, k)
        s.step += k
        end = float(times[-1])
        s.clock = end
        if left is not None and self._finish(ids[left == k], end):
            self.blocked = False

    def _first_tokens(self, first: IntArray, end: float) -> None:
        """first computed their last prompt token in the run's first step: it may fill a
        shared-content block, cached then as in a general step."""
        self.s.first_token_s[first] = end
        for r in first.tolist():
            self.sched.register(r, int(self.s.prompt[r]))

    def _take_run_blocks(self, ids: IntArray, ctx: IntArray, k: int, grow: int) -> None:
        if grow >= 0:
            self.pool.take(grow)
        else:
            self.pool.give_anon(-grow)
        self.decode_blocks += max(grow, 0) if self.simple else int(self._claimed[k - 1])
        b = self.shape.block_size
        self.s.held[ids] = (ctx + (k + b - 1)) // b if self.simple else self.shape.blocks(ctx + k)

    def _run_segments(self, ids: IntArray, k: int) -> None:
        """ids sampled a token at each of the run's k steps (usually continuing a segment)."""
        s = self.s
        if int(_min(s.last_emit[ids])) != s.step - 1:
            self._segments(ids, s.step, s.step + k - 1)
        else:
            s.last_emit[ids] = s.step + k - 1
