"""One engine step's plan under vLLM v1's rules: running first, then waiting FCFS; preemption.

    budget = max_num_batched_tokens
    RUNNING, in order:  new = min(num_tokens - computed, threshold, budget) (threshold:
                        long_prefill_token_threshold, if > 0; new = 0, pp in flight: skip
                        it); get its blocks, else preempt the newest running request (it
                        may be this one) and retry
    WAITING, FCFS, only if nobody was preempted this step and running < max_num_seqs:
                        prefix hits -> computed; new = min(rest, threshold, budget)
                        (no chunking: skip it if rest > budget, vLLM 0.11.0); no blocks
                        -> stop (no skipping ahead)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvplan.limits import MAX_BATCH, MAX_TOKENS, check_int
from kvplan.sim.blocks import BlockPool, KvShape
from kvplan.sim.state import RUNNING, WAITING, IntArray, SimState
from kvplan.specs.serving import EngineConfig

_sum = np.add.reduce  # ndarray.sum without its Python-level wrapper (small arrays, often)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The scheduler's knobs (vLLM engine arguments, defaults resolved)."""

    max_num_batched_tokens: int
    max_num_seqs: int
    chunked_prefill: bool = True
    prefix_caching: bool = True
    long_prefill_token_threshold: int = 0
    """At most this many new tokens per request per step; 0 = no cap (vLLM's default)."""
    prefill_first: bool = False
    """SGLang's scheduler (not vLLM's): a step runs prefill work only - the unfinished prompt
    chunks, then waiting requests FCFS, within ``max_num_batched_tokens`` (SGLang's
    ``chunked_prefill_size``) - whenever there is any it can schedule, and decodes only when
    there is none (``Scheduler.get_next_batch_to_run`` with mixed chunks off, its default).
    Calibration replays of SGLang runs only; the step-by-step engine runs it (fast=False)."""

    def __post_init__(self) -> None:  # vLLM's bounds (0 would schedule nothing, forever)
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1, MAX_TOKENS,
                  where="Limits")
        check_int("max_num_seqs", self.max_num_seqs, 1, MAX_BATCH, where="Limits")
        check_int("long_prefill_token_threshold", self.long_prefill_token_threshold, 0,
                  MAX_TOKENS, where="Limits")

    def cap(self, tokens: int) -> int:
        """vLLM: ``if 0 < long_prefill_token_threshold < num_new_tokens: cap to it``."""
        t = self.long_prefill_token_threshold
        return t if 0 < t < tokens else tokens


DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 256


def default_limits(engine: EngineConfig, gpu_memory_bytes: int | None = None) -> Limits:
    """Limits when the caller gives none (tests, direct use); unset ones take vLLM's defaults.
    ``kvplan.analysis.serving.scheduler_limits`` is what `kvplan simulate` uses: it takes the
    capacity plan's resolved settings (the GPU class decides the defaults there). vLLM
    (arg_utils, usage context OPENAI_API_SERVER) uses 8192 tokens / 1024 sequences on GPUs
    with at least 70 GiB (except A100), else 2048 / 256; an unset max_num_seqs is at most the
    token budget (``min(default, max_num_batched_tokens)``). vLLM 0.11.0 runs chunked prefill
    whatever ``enable_chunked_prefill`` says (_set_default_args turns it on for every
    generating model); a Limits with ``chunked_prefill=False`` is vLLM's other scheduler
    branch (pooling models, later releases)."""
    big = gpu_memory_bytes is not None and gpu_memory_bytes >= 70 * 1024**3
    tokens = engine.max_num_batched_tokens
    if tokens is None:
        tokens = DEFAULT_MAX_NUM_BATCHED_TOKENS if big or gpu_memory_bytes is None else 2048
    # EngineArgs._set_default_args: max_num_seqs = min(default, max_num_batched_tokens)
    seqs = engine.max_num_seqs or min(1024 if big else DEFAULT_MAX_NUM_SEQS, tokens)
    return Limits(max_num_batched_tokens=tokens, max_num_seqs=seqs, chunked_prefill=True,
                  prefix_caching=engine.enable_prefix_caching,
                  long_prefill_token_threshold=engine.long_prefill_token_threshold)


@dataclass(slots=True)
class StepPlan:
    """What one step computes: request ids, new tokens, context before the step."""

    ids: list[int] = field(default_factory=list)
    new: list[int] = field(default_factory=list)
    ctx: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    head_blocked: bool = False
    prefill_blocks: int = 0
    decode_blocks: int = 0
    hit_tokens: int = 0
    query_tokens: int = 0


@dataclass(slots=True)
class Scheduler:
    """Plans steps and frees finished or preempted requests' blocks."""

    state: SimState
    pool: BlockPool
    shape: KvShape
    limits: Limits
    caching: bool = False
    simple: bool = False
    """One full-attention group, one pool block per block of tokens."""
    reg_next: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        g = self.shape.groups
        # Simplification: prefix caching is modelled for one full-attention group only.
        self.simple = len(g) == 1 and g[0].kind == "full" and g[0].weight == 1
        self.caching = self.limits.prefix_caching and self.simple

    def plan(self) -> StepPlan:
        """Schedule one step (mutates running/waiting, blocks and computed tokens)."""
        plan = StepPlan()
        if self.limits.prefill_first:
            return self._plan_prefill_first(plan)
        budget = self._schedule_running(plan, self.limits.max_num_batched_tokens)
        if not plan.preempted:
            self._schedule_waiting(plan, budget)
        return plan

    def _plan_prefill_first(self, plan: StepPlan) -> StepPlan:
        """SGLang: a prefill-only step if any prompt work can be scheduled, else decodes."""
        budget = self._continue_prefills(plan, self.limits.max_num_batched_tokens)
        self._schedule_waiting(plan, budget)
        if not plan.ids:
            self._schedule_running(plan, self.limits.max_num_batched_tokens)
        return plan

    def _continue_prefills(self, plan: StepPlan, budget: int) -> int:
        """The running requests whose prompt is not all computed (SGLang's chunked request),
        in order, each as far as the budget and the free blocks go; no preemption."""
        s = self.state
        for r in list(s.running):
            c = int(s.computed[r])
            left = int(s.prompt[r] + s.generated[r]) - c
            if budget <= 0 or (left <= 1 and s.generated[r] > 0):  # decoding: 1 left
                continue
            new = min(self.limits.cap(left), budget)
            need = self.shape.blocks_one(c + new, c) - int(s.held[r])
            if need > self.pool.free:
                break
            self._grow(r, need)
            self.register(r, c + new)
            plan.prefill_blocks += max(need, 0)
            self._add(plan, r, new, c)
            budget -= new
        return budget

    # ------------------------------------------------------------ running

    def _schedule_running(self, plan: StepPlan, budget: int) -> int:
        """vLLM's running loop; done with numpy when every request gets its blocks."""
        if len(self.state.running) >= 8:
            left = self._running_vectorised(plan, budget)
            if left is not None:
                return left
        return self._running_one_by_one(plan, budget)

    def _running_vectorised(self, plan: StepPlan, budget: int) -> int | None:
        """The whole running list at once; None (nothing changed) if a preemption is due."""
        s = self.state
        ids = np.array(s.running, dtype=np.int64)
        c, p = s.computed[ids], s.prompt[ids]
        left = p + s.generated[ids] - c
        thr = self.limits.long_prefill_token_threshold
        want = np.minimum(left, thr) if thr > 0 else left  # vLLM's long-prefill cap
        new = want
        if int(_sum(want)) > budget:  # the budget runs out inside the list
            before = np.cumsum(want) - want
            new = np.minimum(np.maximum(budget - before, 0), want)
        take = new > 0  # 0: its tokens are in flight (pp), vLLM skips it (no allocate_slots)
        if not take.all():
            ids, c, p, left, new = ids[take], c[take], p[take], left[take], new[take]
        need = self._blocks(c + new, c) - s.held[ids]
        if not self._take_all(need):
            return None
        s.held[ids] += need
        grow = np.maximum(need, 0)
        pre = int(_sum(grow[left > 1]))
        plan.prefill_blocks += pre
        plan.decode_blocks += int(_sum(grow)) - pre
        if self.caching and s.shared_keys is not None:
            prompt = c < p  # computing prompt tokens: a shared-content block may fill
            for r, t in zip(ids[prompt].tolist(), (c + new)[prompt].tolist(), strict=True):
                self.register(r, t)
        plan.ids.extend(ids.tolist())
        plan.new.extend(new.tolist())
        plan.ctx.extend(c.tolist())
        return budget - int(_sum(new))

    def _blocks(self, tokens: IntArray, before: IntArray) -> IntArray:
        if self.simple:
            return (tokens + (self.shape.block_size - 1)) // self.shape.block_size
        return self.shape.blocks(tokens, before)

    def _take_all(self, need: IntArray) -> bool:
        """Take (or give back) every request's block change in order; False if one would
        not fit (then nothing is taken)."""
        if self.simple:  # blocks only grow: the running total peaks at the end
            total = int(_sum(need))
            if total > self.pool.free:
                return False
            self.pool.take(total)
            return True
        # Sliding windows: request i frees its out-of-window blocks before request j > i
        # allocates (vLLM's allocate_slots, in running order), so a later request may use
        # blocks an earlier one gave back. Fit = no running prefix of changes exceeds free;
        # then the gives go back before the takes, or the takes could exceed the free count.
        if len(need) and int(np.cumsum(need).max()) > self.pool.free:
            return False
        self.pool.give_anon(int(-_sum(np.minimum(need, 0))))
        self.pool.take(int(_sum(np.maximum(need, 0))))
        return True

    def _running_one_by_one(self, plan: StepPlan, budget: int) -> int:
        s = self.state
        i = 0
        while i < len(s.running) and budget > 0:
            r = s.running[i]
            c = int(s.computed[r])
            left = int(s.prompt[r] + s.generated[r]) - c
            new = min(self.limits.cap(left), budget)
            if new == 0:  # its tokens are in flight (pp): vLLM skips it, no allocate_slots
                i += 1
                continue
            need = self.shape.blocks_one(c + new, c) - int(s.held[r])
            if not self._make_room(r, need, plan):
                break
            self._grow(r, need)
            self.register(r, c + new)
            if left > 1:
                plan.prefill_blocks += max(need, 0)
            else:
                plan.decode_blocks += max(need, 0)
            self._add(plan, r, new, c)
            budget -= new
            i += 1
        return budget

    def _make_room(self, r: int, need: int, plan: StepPlan) -> bool:
        """Preempt newest running requests until r's blocks fit; False if r itself went."""
        while need > self.pool.free:
            victim = self.state.running.pop()
            self.preempt(victim)
            plan.preempted.append(victim)
            if victim == r:
                return False
        return True

    def _grow(self, r: int, need: int) -> None:
        if need >= 0:
            self.pool.take(need)
        else:  # sliding window: blocks wholly before the window go back
            self.pool.give_anon(-need)
        self.state.held[r] += need

    # ------------------------------------------------------------ waiting

    def admit_waiting(self, plan: StepPlan, budget: int) -> None:
        """The WAITING half of a step alone (the lean step schedules the running half)."""
        self._schedule_waiting(plan, budget)

    def _schedule_waiting(self, plan: StepPlan, budget: int) -> None:
        s = self.state
        b = self.shape.block_size
        skipped: list[int] = []
        while s.waiting and budget > 0 and len(s.running) < self.limits.max_num_seqs:
            r = s.waiting[0]
            total = int(s.prompt[r] + s.generated[r])
            keys, own = self._lookup(r, total)
            hit = (len(keys) + own) * b
            # vLLM 0.11.0 counts every lookup (get_computed_blocks), one that then gets no
            # blocks or is skipped too, and a preempted request's (its own blocks hit too)
            plan.hit_tokens += hit
            plan.query_tokens += total
            new = self.limits.cap(total - hit)
            if not self.limits.chunked_prefill and new > budget:
                skipped.append(s.waiting.popleft())  # vLLM 0.11.0 skips it, tries the next
                continue
            new = min(new, budget)
            # vLLM (0.11) frees skipped blocks on request.num_computed_tokens, 0 here
            need = self.shape.blocks_one(hit + new, 0) - len(keys) - own
            if need + self.pool.evictable_hits(keys) + own > self.pool.free:
                # blocked until blocks are freed; after a skip a later step's budget may
                # let a skipped request in first, so the fast paths may not count on it
                plan.head_blocked = not skipped
                break
            s.waiting.popleft()
            if s.preemptions[r] == 0:
                s.hit_tokens[r] = hit  # vLLM's num_cached_tokens: set once
            self._admit(r, keys, own, need, hit)
            self.register(r, hit + new)
            plan.prefill_blocks += need
            self._add(plan, r, new, hit)
            budget -= new
        # vLLM 0.11.0 puts the skipped ones back at the front in reverse order
        # (FCFSRequestQueue.prepend_requests reverses twice; fixed after 0.11 by vLLM PR 32173)
        s.waiting.extendleft(skipped)

    def _lookup(self, r: int, total: int) -> tuple[list[int], int]:
        """Cached leading blocks of r: copies of its shared keys (the first cached of each,
        vLLM's get_one_block), then its own blocks (after preemption).

        vLLM never hits the last token: at most (total - 1) // B blocks, so >= 1 is computed.
        """
        if not self.caching:
            return [], 0
        limit = (total - 1) // self.shape.block_size
        keys = self.state.shared_keys[r] if self.state.shared_keys is not None else []
        copies = self.pool.copies
        hit: list[int] = []
        for k in keys[:limit]:
            same = copies.get(k)
            if not same:
                break
            hit.append(next(iter(same)))
        if len(hit) < len(keys) or len(hit) >= limit:
            return hit, 0
        return hit, min(self.pool.own_cached(r), limit - len(hit))

    def blocked_lookup(self) -> tuple[int, int, int] | None:
        """(hit tokens, tokens, room) the blocked FCFS head's lookup counts at each step of a
        decode run (a preempted one's too, vLLM 0.11.0); room: the blocks the run may take
        from the free queue's head before it evicts one of those hit blocks (a cached free
        shared copy, or a preempted head's own blocks), so its hits stay the same."""
        s = self.state
        r = s.waiting[0]
        total = int(s.prompt[r] + s.generated[r])
        keys, own = self._lookup(r, total)
        room = self.pool.room_before(keys, r if own else -1)
        return (len(keys) + own) * self.shape.block_size, total, room

    def _admit(self, r: int, keys: list[int], own: int, need: int, hit: int) -> None:
        s = self.state
        self.pool.touch(keys, r, own)
        self.pool.forget_own(r)
        self.pool.take(need)
        s.held[r] = need + len(keys) + own
        s.held_keys[r] = list(keys)
        self.reg_next[r] = len(keys) + own
        s.computed[r] = hit
        s.running.append(r)
        s.status[r] = RUNNING
        if s.scheduled_s[r] != s.scheduled_s[r]:  # NaN: first time scheduled
            s.scheduled_s[r] = s.clock

    def register(self, r: int, tokens: int) -> None:
        """Cache r's shared-content blocks that become full this step (vLLM caches on alloc)."""
        keys = self.state.shared_keys
        if not self.caching or keys is None:
            return
        mine = keys[r]
        start = self.reg_next.get(r, 0)
        stop = min(tokens // self.shape.block_size, len(mine))
        if start >= stop:
            return
        held = self.state.held_keys.setdefault(r, [])
        for j in range(start, stop):  # cached even where another copy is (vLLM 0.11)
            held.append(self.pool.register(mine[j]))
        self.reg_next[r] = stop

    @staticmethod
    def _add(plan: StepPlan, r: int, new: int, ctx: int) -> None:
        plan.ids.append(r)
        plan.new.append(new)
        plan.ctx.append(ctx)

    # ------------------------------------------------------------ freeing

    def preempt(self, r: int) -> None:
        """Free r's blocks, reset its progress (recompute later), put it first in WAITING."""
        s = self.state
        self.free(r, keep_own=True)
        s.computed[r] = 0
        s.status[r] = WAITING
        s.preemptions[r] += 1
        s.preempt_steps.append(s.step)
        s.close_segment(r)
        s.waiting.appendleft(r)

    def free(self, r: int, *, keep_own: bool) -> None:
        """Return r's blocks tail first, as vLLM frees them (reversed block order): the
        partial tail, own full blocks, then the shared-key copies."""
        s = self.state
        keys = s.held_keys.pop(r, [])
        self.reg_next.pop(r, None)
        own = 0
        if keep_own and self.caching:
            own = max(0, int(s.computed[r]) // self.shape.block_size - s.n_shared(r))
        self.pool.give_anon(int(s.held[r]) - len(keys) - own)
        self.pool.give_own(r, own)
        for c in reversed(keys):
            self.pool.release(c)
        s.held[r] = 0
