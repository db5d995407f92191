"""One prefill or decode instance of a disaggregated fleet: the simulator loop, turn by turn.

Both reuse the aggregated loop (simulator._Loop: its scheduler, block pool, lean step and
decode fast-forward) with the workload's arrivals replaced by an inbox the fleet fills::

    prefill  inbox (t, r) -> WAITING; every request has output 1 (the proxy's max_tokens=1);
             when it samples that token it finishes but keeps its blocks until the fleet
             calls release(r, t) (the decode side has read its KV: vLLM's finished_sending)
    decode   inbox (t, r) -> pending (FCFS) -> blocks for the whole prompt allocated when
             they fit (vLLM: WAITING_FOR_REMOTE_KVS) -> the fleet's link moves the KV ->
             ready -> RUNNING with prompt - 1 tokens computed (vLLM recomputes the last
             prompt token and samples the first output token)

A turn runs what the aggregated loop's turn runs (one step, a lean step or a decode run);
``horizon`` caps runs so no step starts after an event another instance may still send.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from kvplan.sim.result import IntArray
from kvplan.sim.scheduler import StepPlan
from kvplan.sim.simulator import _Loop
from kvplan.sim.state import RUNNING, WAITING

_INF = math.inf


class _Instance(_Loop):
    """The shared part: inbox, horizon, one turn at a time."""

    horizon: float = _INF
    inbox: list[tuple[float, int]]
    stalled: bool = False
    """Nothing running and the waiting head's blocks are held by requests that are not
    running (prefill: awaiting their transfer; decode: being transferred): the instance
    waits for its next event instead of stepping."""

    def _api_setup(self, timer: object) -> None:
        """No release plan of its own: the fleet delivers the instance's requests to its
        inbox, after the API paths it prices itself (fleet._delays)."""
        self.delay = self.admit = self.order = None
        self.arrivals = []
        self.api_free = 0.0

    def turn(self) -> None:
        """Release what is due by the clock, then run one turn of the aggregated loop."""
        self.stalled = False
        s = self.s
        self.idle |= not s.running and not s.waiting  # the last step left nothing to run
        self._release()
        if not s.running and not s.waiting:
            return
        self._turn()

    def next_time(self) -> float:
        """When this instance next acts: its clock while busy, else its next event, or its
        clock if that is later (an idle instance whose last step ended after an event it
        has not seen yet acts at its clock, after everything due by then reached it)."""
        s = self.s
        if (s.running or s.waiting) and not self.stalled:
            return s.clock
        t = self.next_event()
        return t if t > s.clock else s.clock

    def next_event(self) -> float:
        return self.inbox[0][0] if self.inbox else _INF

    def rank(self, r: int) -> int:
        """The DP rank serving r: 0, one engine (a DP instance: dp_instance.py)."""
        return 0

    def wake(self, t: float) -> None:
        """An idle or stalled instance's clock moves to ``t`` (nothing happens in between)."""
        if self.stalled or (not self.s.running and not self.s.waiting):
            self.s.clock = max(self.s.clock, t)

    def _no_step(self, plan: StepPlan) -> None:
        if plan.preempted or self.s.running:
            super()._no_step(plan)
            return
        self.stalled = True  # the waiting head waits for blocks held outside the running list
        self.blocked = True
        self.idle = True  # nothing runs while it waits


class PrefillLoop(_Instance):
    """A prefill instance: prompts with one output token; blocks held until released."""

    def attach(self, on_done: Callable[[int, float], None]) -> None:
        self.inbox = []
        self.releases: list[tuple[float, int]] = []
        self.on_done = on_done

    def add(self, t: float, r: int) -> None:
        heapq.heappush(self.inbox, (t, r))

    def release(self, t: float, r: int) -> None:
        heapq.heappush(self.releases, (t, r))

    def next_event(self) -> float:
        a = self.inbox[0][0] if self.inbox else _INF
        return min(a, self.releases[0][0]) if self.releases else a

    def _next_arrival(self) -> float:
        return min(self.next_event(), self.horizon)

    def _release(self) -> None:
        s = self.s
        now = s.clock
        while self.releases and self.releases[0][0] <= now:
            r = heapq.heappop(self.releases)[1]
            self.sched.free(r, keep_own=False)
            self.blocked = False
        while self.inbox and self.inbox[0][0] <= now:
            t, r = heapq.heappop(self.inbox)
            s.sent_s[r] = t
            s.status[r] = WAITING
            s.waiting.append(r)

    def _finish(self, fin: IntArray, end: float) -> bool:
        if len(fin) == 0:
            return False
        for r in self._close(fin, end):
            self.on_done(r, end)
        return True


class DecodeLoop(_Instance):
    """A decode instance: admits transferred prompts when their blocks fit, then decodes."""

    def attach(self, on_admit: Callable[[int, float], float],
               on_finish: Callable[[int, float], None]) -> None:
        """``on_admit(r, t)`` starts r's transfer at t and returns when it ends;
        ``on_finish(r, t)``: r sampled its last token at t."""
        self.inbox = []
        self.pending: deque[int] = deque()
        self.transfers: list[tuple[float, int]] = []
        self.ready: deque[int] = deque()
        self.on_admit = on_admit
        self.on_finish = on_finish
        n = len(self.s.arrival)
        self.arrive_s = np.full(n, np.nan)
        self.admit_s = np.full(n, np.nan)
        self.ready_s = np.full(n, np.nan)
        self.tried_s = -_INF  # when the pending head last failed to get its blocks
        self.starved = np.zeros(n, dtype=np.bool_)
        """Requests that found too few free blocks at an admission attempt (or sat behind one
        that did): they waited for decode blocks, holding their prefill blocks."""

    def add(self, t: float, r: int) -> None:
        heapq.heappush(self.inbox, (t, r))

    def next_event(self) -> float:
        """The next inbox arrival or transfer end; now, if a ready or pending request can
        start (an idle instance whose last request just left)."""
        if (self.ready or self.pending) and self._can_act():
            return self.s.clock
        a = self.inbox[0][0] if self.inbox else _INF
        return min(a, self.transfers[0][0]) if self.transfers else a

    def _can_act(self) -> bool:
        """Something due now: a ready request with a free sequence slot, or an admission
        attempt (the scheduler tries the pending head at every step boundary, once: one
        that fails marks the pending requests as waiting for blocks)."""
        seqs = len(self.s.running) < self.limits.max_num_seqs
        if not seqs or self.ready:
            return seqs
        if not self.pending or self.s.waiting:
            return False
        return (self._need(self.pending[0]) <= self.pool.free
                or self.tried_s != self.s.clock)

    def _next_arrival(self) -> float:
        return min(self.next_event(), self.horizon)

    def _need(self, r: int) -> int:
        return self.shape.blocks_one(int(self.s.prompt[r]), 0)

    def _release(self) -> None:
        s = self.s
        now = s.clock
        while self.inbox and self.inbox[0][0] <= now:
            t, r = heapq.heappop(self.inbox)
            self.arrive_s[r] = t
            s.sent_s[r] = t
            self.pending.append(r)
        while self.transfers and self.transfers[0][0] <= now:
            self.ready.append(heapq.heappop(self.transfers)[1])
        seqs = self.limits.max_num_seqs
        if self.ready and len(s.running) < seqs:
            self._start_ready(seqs)
        self._admit_pending(now, seqs)

    def _start_ready(self, seqs: int) -> None:
        """Transferred requests join the running list (the last prompt token to compute)."""
        s = self.s
        if self.cohort is not None:
            if self.tail is None and len(self.ready) == 1:
                # the lean step's tail: one request at the end of the running list with
                # tokens to compute (here the last prompt token, its blocks already held)
                self.tail = self.ready[0]
            else:
                self._lean_drop()
        while self.ready and len(s.running) < seqs:
            r = self.ready.popleft()
            s.computed[r] = int(s.prompt[r]) - 1
            s.status[r] = RUNNING
            s.scheduled_s[r] = s.clock
            s.running.append(r)
        self.steady = False

    def _admit_pending(self, now: float, seqs: int) -> None:
        """FCFS: the head gets blocks for its whole prompt or everyone behind it waits;
        preempted requests (WAITING) go first, as they sit ahead in vLLM's waiting queue."""
        s = self.s
        while self.pending and not s.waiting and len(s.running) < seqs:
            r = self.pending[0]
            need = self._need(r)
            if need > self.pool.free:
                self.starved[list(self.pending)] = True
                self.tried_s = now
                return
            self.pending.popleft()
            self.pool.take(need)
            self.admission_peak = max(self.admission_peak, self.pool.used)
            s.held[r] = need
            self.prefill_blocks += need
            self.admit_s[r] = now
            t = self.on_admit(r, now)
            self.ready_s[r] = t
            heapq.heappush(self.transfers, (t, r))

    def _fast_forward(self) -> bool:
        """No decode run while a transferred prompt waits for blocks on a shape whose
        sliding windows free blocks as it decodes: the head is tried at every step boundary
        (as the scheduler does), not only at a run's end."""
        if self.pending and not self.simple:
            return False
        return super()._fast_forward()

    def _finish(self, fin: IntArray, end: float) -> bool:
        if len(fin) == 0:
            return False
        for r in self._close(fin, end):
            self.sched.free(r, keep_own=False)
            self.on_finish(r, end)
        self.blocked = False
        return True
