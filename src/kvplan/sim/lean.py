"""The lean step: one general step in O(1) Python for the common shape of a running list.

When the KV shape is one full-attention group and the timer prices a step from sums
(``AggregateTimer``), the running list is usually

    running = [d_1 .. d_n]  (+ tail)       every d_i decodes: exactly 1 token left, sampled >= 1
                                            tail: the last request, any tokens left (a prefill)

Then the decoders are kept as a *cohort* of sums instead of arrays. Decoder r joined at step
j_r with c_r tokens computed and g_r sampled, so at step t it holds c_r + (t - j_r) tokens and
needs a new block exactly when that is a multiple of B::

    key_r      = (c_r - j_r) mod B         hist[key] = decoders with that key
    S          = sum_r (c_r - j_r)          context of the cohort at step t = S + n * t
    new blocks = hist[(-t) mod B]           pairs = context + n (each attends context + 1)
    r's last token is sampled at step j_r + (output_r - g_r) - 1

A step is then: decoders (n tokens), the tail's chunk, FCFS admissions (scheduler.py's own
code), priced by ``step_time_agg``. Anything else -- a preemption due, the budget ending
inside the decoders, a running list of another shape -- hands over to the general step
(arrays made true first, ``materialize``); fast-forwarded decode runs read the same arrays.
Equal to ``fast=False`` step for step (tests/test_sim_properties.py).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from kvplan.sim.state import IntArray, SimState


@dataclass(slots=True)
class Cohort:
    """The decoders of the running list as sums (see the module docstring)."""

    block_size: int
    size: int
    """Requests in the workload (the per-request arrays' length)."""
    n: int = 0
    s: int = 0
    hist: list[int] = field(default_factory=list)
    base_ctx: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    base_gen: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    base_step: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    member: list[bool] = field(default_factory=list)
    finish_at: dict[int, list[int]] = field(default_factory=dict)
    fin_step: list[int] = field(default_factory=list)
    heap: list[int] = field(default_factory=list)
    """The steps in finish_at, as a heap (next_finish)."""

    def __post_init__(self) -> None:
        self.hist = [0] * self.block_size
        self.base_ctx = np.zeros(self.size, dtype=np.int64)
        self.base_gen = np.zeros(self.size, dtype=np.int64)
        self.base_step = np.zeros(self.size, dtype=np.int64)
        self.member = [False] * self.size
        self.fin_step = [-1] * self.size

    def join(self, r: int, ctx: int, gen: int, step: int, output: int) -> None:
        """r decodes from ``step`` on, with ctx tokens computed and gen sampled."""
        self.base_ctx[r], self.base_gen[r], self.base_step[r] = ctx, gen, step
        self.member[r] = True
        self.n += 1
        self.s += ctx - step
        self.hist[(ctx - step) % self.block_size] += 1
        last = step + output - gen - 1
        self.fin_step[r] = last
        if last not in self.finish_at:
            self.finish_at[last] = []
            heapq.heappush(self.heap, last)
        self.finish_at[last].append(r)

    def leave(self, r: int) -> None:
        if not self.member[r]:
            return
        self.member[r] = False
        key = int(self.base_ctx[r] - self.base_step[r])
        self.n -= 1
        self.s -= key
        self.hist[key % self.block_size] -= 1

    def finishing(self, step: int) -> list[int]:
        """Members whose last token is sampled at ``step`` (entries of leavers skipped)."""
        rs = self.finish_at.pop(step, None)
        if not rs:
            return []
        return [r for r in rs if self.member[r] and self.fin_step[r] == step]

    def next_finish(self) -> int:
        """The next step at which a member samples its last token (members exist)."""
        h = self.heap
        while h[0] not in self.finish_at:
            heapq.heappop(h)
        return h[0]

    def materialize(self, s: SimState, ids: IntArray, step: int) -> None:
        """Write members' true computed/generated/held/last-emission values at ``step``."""
        if len(ids) == 0:
            return
        ran = step - self.base_step[ids]
        done = self.base_ctx[ids] + ran
        s.computed[ids] = done
        s.generated[ids] = self.base_gen[ids] + ran
        s.held[ids] = (done + (self.block_size - 1)) // self.block_size
        s.last_emit[ids] = step - 1

    def members(self, ids: list[int]) -> IntArray:
        m = self.member
        return np.array([r for r in ids if m[r]], dtype=np.int64)


def cohort_from_state(s: SimState, block_size: int) -> tuple[Cohort, int | None] | None:
    """The cohort and tail of the running list, or None if it has another shape."""
    run = s.running
    c = Cohort(block_size=block_size, size=len(s.arrival))
    if not run:
        return c, None
    ids = np.array(run, dtype=np.int64)
    left = s.prompt[ids] + s.generated[ids] - s.computed[ids]
    # a decoder continues its run of emissions: one that sampled before a preemption and
    # recomputed up to its last token has not (it samples as the tail: a new run)
    dec = (left == 1) & (s.generated[ids] >= 1) & (s.last_emit[ids] == s.step - 1)
    tail = None
    if not bool(dec[-1]):
        tail = run[-1]
        dec = dec[:-1]
    if not bool(np.all(dec)):
        return None
    step = s.step
    for r, ctx, gen, out in zip(run[:len(dec)], s.computed[ids[:len(dec)]].tolist(),
                                s.generated[ids[:len(dec)]].tolist(),
                                s.output[ids[:len(dec)]].tolist(), strict=True):
        c.join(r, ctx, gen, step, out)
    return c, tail
