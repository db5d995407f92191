"""simulate(): a continuous-batching vLLM v1 server replayed step by step over a workload.

Each loop turn either runs one general step (scheduler.py), or, when nothing can change but
tokens, fast-forwards k identical pure-decode steps at once::

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

import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from kvplan.costs.batch import StepTimer
from kvplan.errors import InputError
from kvplan.sim.blocks import BlockPool, KvShape, kv_shape_from
from kvplan.sim.result import IntArray, KvSeries, SimulationResult
from kvplan.sim.scheduler import Limits, Scheduler, StepPlan
from kvplan.sim.state import FINISHED, REJECTED, WAITING, SimState, WorkloadLike, new_state
from kvplan.specs.kv import ModelKv
from kvplan.specs.serving import EngineConfig

_sum, _min, _max = np.add.reduce, np.minimum.reduce, np.maximum.reduce  # no Python wrappers
_FAST_CELLS = 1 << 20  # requests x steps evaluated per fast-forward (bounds memory)
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256


def default_limits(engine: EngineConfig, gpu_memory_bytes: int | None = None) -> Limits:
    """Limits when the caller gives none (tests, direct use); unset ones take vLLM's defaults.

    ``kvplan.analysis.serving.scheduler_limits`` is what `kvplan simulate` uses: it takes the
    capacity plan's resolved settings (the GPU class decides the defaults there).

    vLLM (arg_utils, usage context OPENAI_API_SERVER) uses 8192 tokens / 1024 sequences on
    GPUs with at least 70 GiB (except A100), else 2048 / 256. Without chunked prefill the
    token budget must hold a whole prompt: max(max_model_len, 2048).
    """
    big = gpu_memory_bytes is not None and gpu_memory_bytes >= 70 * 1024**3
    tokens = engine.max_num_batched_tokens
    if tokens is None and not engine.enable_chunked_prefill:
        tokens = max(engine.max_model_len or 2048, 2048)
    if tokens is None:
        tokens = DEFAULT_MAX_NUM_BATCHED_TOKENS if big or gpu_memory_bytes is None else 2048
    seqs = engine.max_num_seqs or (1024 if big else DEFAULT_MAX_NUM_SEQS)
    return Limits(max_num_batched_tokens=tokens, max_num_seqs=seqs,
                  chunked_prefill=engine.enable_chunked_prefill,
                  prefix_caching=engine.enable_prefix_caching)


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
    b = block_size or engine.block_size
    if num_blocks < 2:
        raise InputError(f"the KV pool must have at least two blocks (one is vLLM's null "
                         f"block), got {num_blocks}")
    shape = _shape(kv, b)
    lim = limits or default_limits(engine)
    mml = max_model_len if max_model_len is not None else engine.max_model_len
    loop = _Loop(workload=workload, timer=timer, shape=shape, limits=lim, num_blocks=num_blocks,
                 max_model_len=mml, shared_prefix_tokens=shared_prefix_tokens, fast=fast,
                 progress=progress)
    loop.validate = validate
    return loop.run()


def _shape(kv: ModelKv | KvShape | None, block_size: int) -> KvShape:
    if kv is None:
        return KvShape(block_size=block_size)
    if isinstance(kv, KvShape):
        if kv.block_size != block_size:
            raise InputError(f"KvShape block size {kv.block_size} != --block-size {block_size}")
        return kv
    return kv_shape_from(kv, block_size)


class _Series:
    """Per-step columns in growable numpy buffers (runs are written as slices)."""

    __slots__ = ("cols", "n")

    def __init__(self) -> None:
        self.n = 0
        self.cols: list[Any] = [np.zeros(1024), np.zeros(1024)] + [np.zeros(1024, dtype=np.int64)
                                                        for _ in range(5)]

    def _room(self, k: int) -> None:
        if self.n + k > len(self.cols[0]):
            size = max(2 * len(self.cols[0]), self.n + k)
            self.cols = [np.resize(c, size) for c in self.cols]

    def add(self, *values: float) -> None:
        """One step: start, end, used blocks, logical bytes, running, waiting, new tokens."""
        self._room(1)
        i = self.n
        c = self.cols
        c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], c[5][i], c[6][i] = values
        self.n += 1

    def add_run(self, times: np.ndarray, used: np.ndarray, logical: np.ndarray, running: int,
                waiting: int) -> None:
        """k decode steps: times has k + 1 entries (starts, then the last end)."""
        k = len(used)
        self._room(k)
        a, b = self.n, self.n + k
        c = self.cols
        c[0][a:b] = times[:-1]
        c[1][a:b] = times[1:]
        c[2][a:b] = used
        c[3][a:b] = logical
        c[4][a:b] = running
        c[5][a:b] = waiting
        c[6][a:b] = running
        self.n = b

    def build(self) -> KvSeries:
        c = [col[:self.n].copy() for col in self.cols]
        return KvSeries(start_s=c[0], end_s=c[1], used_blocks=c[2], logical_bytes=c[3],
                        running=c[4], waiting=c[5], new_tokens=c[6])


class _Loop:
    """The simulation loop: releases arrivals, runs general steps or fast-forwards."""

    def __init__(self, *, workload: WorkloadLike, timer: StepTimer, shape: KvShape,
                 limits: Limits, num_blocks: int, max_model_len: int | None,
                 shared_prefix_tokens: int, fast: bool,
                 progress: Callable[[int, int], None] | None) -> None:
        self.s: SimState = new_state(workload, shape.block_size, shared_prefix_tokens)
        self.timer = timer
        self.shape = shape
        self.limits = limits
        self.pool = BlockPool(num_blocks - 1)  # vLLM's BlockPool keeps one as the null block
        self.sched = Scheduler(self.s, self.pool, shape, limits)
        self.fast = fast
        self.progress = progress
        self.series = _Series()
        self.ptr = 0
        self.done = 0
        self.blocked = False
        self.query_tokens = 0
        self.prefill_blocks = 0
        self.decode_blocks = 0
        n = len(self.s.arrival)
        conc = workload.closed_loop_concurrency
        self.slots: list[float] | None = [0.0] * min(conc, n) if conc else None
        g = shape.groups
        self.simple = len(g) == 1 and g[0].kind == "full" and g[0].weight == 1
        self.steady = False
        self.validate = False
        self._step_no: IntArray = np.zeros(0, dtype=np.int64)
        self._opens: IntArray = np.zeros(0, dtype=np.int64)
        self.reasons = _reject_reasons(self.s, shape, limits, num_blocks - 1, max_model_len)
        self.arrivals: list[float] = self.s.arrival.tolist()
        self.next_s = math.inf
        self._update_next()

    # ------------------------------------------------------------ arrivals

    def _next_arrival(self) -> float:
        """When the next request is sent (cached: it changes only in _release and _slot_free)."""
        return self.next_s

    def _update_next(self) -> None:
        if self.ptr >= len(self.arrivals):
            self.next_s = math.inf
            return
        a = self.arrivals[self.ptr]
        if self.slots is None:
            self.next_s = a
        else:
            self.next_s = max(a, self.slots[0]) if self.slots else math.inf

    def _release(self) -> None:
        """Requests sent by the clock's time join WAITING (or are rejected at once)."""
        s = self.s
        while (t := self.next_s) <= s.clock:
            i = self.ptr
            self.ptr += 1
            if self.slots is not None:
                heapq.heappop(self.slots)
            self._update_next()
            s.sent_s[i] = t
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
        s = self.s
        n = len(s.arrival)
        turns = 0
        while True:
            self._release()
            if not s.running and not s.waiting:
                t = self._next_arrival()
                if t == math.inf:
                    break
                s.clock = max(s.clock, t)
                self.blocked = False
                continue
            if not (self.fast and self._fast_forward()):
                self._general_step()
            if self.validate:
                self._check_books()
            turns += 1
            if self.progress is not None and turns % 4096 == 0:
                self.progress(self.done, n)
        if self.progress is not None:
            self.progress(self.done, n)
        return self._result()

    def _general_step(self) -> None:
        s = self.s
        plan = self.sched.plan()
        if not plan.ids:
            # Only preemptions happened (the next turn schedules what is left).
            assert plan.preempted, "scheduler made no progress"
            self.blocked = False
            self.steady = False
            return
        ids = np.array(plan.ids, dtype=np.int64)
        new = np.array(plan.new, dtype=np.int64)
        ctx = np.array(plan.ctx, dtype=np.int64)
        dur = float(self.timer.step_time_s(new, ctx))
        start, end = s.clock, s.clock + dur
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
        self.blocked = plan.head_blocked and not finished and not plan.preempted

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
        s = self.s
        gone = fin.tolist()
        for r in gone:
            self.sched.free(r, keep_own=False)
            s.close_segment(r)
            self._slot_free(end)
        s.status[fin] = FINISHED
        s.finish_s[fin] = end
        self.done += len(gone)
        out = set(gone)
        s.running = [r for r in s.running if r not in out]
        return True

    # ------------------------------------------------------------ fast path

    def _admission_possible(self) -> bool:
        s = self.s
        if not s.waiting or self.blocked:
            return False
        n = len(s.running)
        return n < self.limits.max_num_seqs and n < self.limits.max_num_batched_tokens

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
        left = s.output[ids] - gen
        k = k_fin = int(_min(left))
        if not self.simple:
            k = min(k, max(1, _FAST_CELLS // n))
        times = self._run_times(self.timer.decode_run_s(ctx, k))
        k = min(k, max(1, int(np.searchsorted(times[:k], self._next_arrival(), side="left"))))
        need, logical = self._run_blocks(ids, ctx, k)
        if not self.simple or int(need[-1]) > self.pool.free:
            over = np.flatnonzero(need > self.pool.free)
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
        self._apply_run(ids, ctx, gen, left if k == k_fin else None, need, logical,
                        times[:k + 1])
        return True

    def _head_need(self, n: int) -> int:
        """Blocks the FCFS head needs to be admitted after n running decodes (no prefix
        caching on these shapes); more than the pool when the token budget stops it first."""
        s = self.s
        r = s.waiting[0]
        total = int(s.prompt[r] + s.generated[r])
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
        self.decode_blocks += max(grow, 0)
        b = self.shape.block_size
        self.s.held[ids] = (ctx + (k + b - 1)) // b if self.simple else self.shape.blocks(ctx + k)

    def _run_segments(self, ids: IntArray, k: int) -> None:
        """ids sampled a token at each of the run's k steps (usually continuing a segment)."""
        s = self.s
        if int(_min(s.last_emit[ids])) != s.step - 1:
            self._segments(ids, s.step, s.step + k - 1)
        else:
            s.last_emit[ids] = s.step + k - 1

    def _check_books(self) -> None:
        """Blocks conserved: free (queue) + physically used == pool; refs match holders."""
        s, pool = self.s, self.pool
        queued = sum(seg.count for seg in pool.queue)
        assert queued == pool.free, (queued, pool.free)
        holders: dict[int, int] = {}
        for keys in s.held_keys.values():
            for k in keys:
                holders[k] = holders.get(k, 0) + 1
        assert all(pool.ref[k] == h for k, h in holders.items())
        shared_extra = sum(h - 1 for h in holders.values())
        physical = int(s.held.sum()) - shared_extra
        assert physical + pool.free == pool.num_blocks, (physical, pool.free)
        assert 0 <= pool.used <= pool.num_blocks

    # ------------------------------------------------------------ result

    def _result(self) -> SimulationResult:
        s = self.s
        for r in np.flatnonzero(s.last_emit >= 0).tolist():
            s.close_segment(r)
        steps = self.series.build()
        return SimulationResult(
            arrival_s=s.arrival, sent_s=s.sent_s, scheduled_s=s.scheduled_s,
            first_token_s=s.first_token_s, finish_s=s.finish_s, prompt_tokens=s.prompt,
            output_tokens=s.output, preemptions=s.preemptions, prefix_hit_tokens=s.hit_tokens,
            finished=s.status == FINISHED, rejected=dict(s.reject_reason),
            steps=steps,
            preemption_s=steps.start_s[np.array(s.preempt_steps, dtype=np.int64)],
            seg_req=np.array(s.seg_req, dtype=np.int64),
            seg_first=np.array(s.seg_first, dtype=np.int64),
            seg_last=np.array(s.seg_last, dtype=np.int64),
            num_blocks=self.pool.num_blocks + 1, block_size=self.shape.block_size,
            prefill_claimed_blocks=self.prefill_blocks, decode_claimed_blocks=self.decode_blocks,
            prefix_query_tokens=self.query_tokens,
        )


def _reject_reasons(s: SimState, shape: KvShape, limits: Limits, usable: int,
                    max_model_len: int | None) -> dict[int, str]:
    """Requests that can never be served, with the reason vLLM (or physics) gives."""
    total = s.prompt + s.output
    reasons: dict[int, str] = {}
    bad = np.flatnonzero((s.prompt < 1) | (s.output < 1))
    for i in bad.tolist():
        reasons[i] = "prompt and output must each have at least 1 token"
    if max_model_len is not None:
        for i in np.flatnonzero(total > max_model_len).tolist():
            reasons.setdefault(i, f"prompt + output = {int(total[i])} tokens exceeds "
                                  f"max_model_len {max_model_len}")
    peak = _solo_peak_blocks(s.prompt, total, shape, limits)
    for i in np.flatnonzero(peak > usable).tolist():
        reasons.setdefault(i, f"needs {int(peak[i])} KV blocks alone; the pool has {usable} "
                              f"usable (vLLM keeps one more as its null block)")
    if not limits.chunked_prefill:
        cap = limits.max_num_batched_tokens
        for i in np.flatnonzero(total - 1 > cap).tolist():
            reasons.setdefault(i, f"{int(total[i]) - 1} tokens to (re)compute exceed "
                                  f"max_num_batched_tokens {cap} without chunked prefill")
    return reasons


def _solo_peak_blocks(prompt: IntArray, total: IntArray, shape: KvShape,
                      limits: Limits) -> IntArray:
    """Most pool blocks each request may hold when it runs alone.

    Full attention and state groups only grow: the last step (prompt + output - 1 tokens)
    is the peak. A sliding window holds a whole prefill chunk (vLLM frees on the tokens
    computed before the step), so its peak may be a chunk: chunks of max_num_batched_tokens
    (or one chunk without chunked prefill) over up to prompt + output - 1 tokens, which
    covers the prompt and any recompute after a preemption. In decode a sliding group is
    periodic in the block size, so the last B decode steps cover the rest.
    """
    last = np.maximum(total - 1, 1)
    peak = shape.blocks(last)
    if all(g.kind != "sliding" for g in shape.groups) or len(prompt) == 0:
        return peak
    first = np.minimum(prompt + 1, last)
    for j in range(1, shape.block_size):  # the last B decode states, kept >= prompt + 1
        peak = np.maximum(peak, shape.blocks(np.maximum(last - j, first)))
    chunk = limits.max_num_batched_tokens if limits.chunked_prefill else int(last.max())
    c = np.zeros_like(last)
    while (live := c < last).any():
        t = np.minimum(c + chunk, last)
        peak = np.where(live, np.maximum(peak, shape.blocks(t, c)), peak)
        c = c + chunk
    return peak
