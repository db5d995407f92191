"""One DP rank of a lockstep fleet: the aggregated loop's scheduler and pool, stepped from outside.

The fleet (``kvplan.sim.dp.lockstep``) asks every rank for its plan at the same moment,
prices the lockstep step, then tells each rank when it ended: the rank applies its plan
(``_Loop._apply_step``) or, with nothing scheduled, records a dummy step (vLLM's
``execute_dummy_batch``). Every rank records every lockstep step, so step numbers agree.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from kvplan.sim.books import check_books
from kvplan.sim.result import IntArray
from kvplan.sim.scheduler import StepPlan
from kvplan.sim.simulator import _Loop
from kvplan.sim.state import WAITING


@dataclass(frozen=True, slots=True)
class RankPlan:
    """A rank's scheduled batch for one lockstep step."""

    plan: StepPlan
    ids: IntArray
    new: IntArray
    ctx: IntArray
    tokens: int


class Lockstep(_Loop):
    """The lockstep part of a rank: plan a step when the fleet asks, apply it when told its
    end (also a disaggregated fleet's DP ranks: sim/disagg/dp_instance.py)."""

    @property
    def unfinished(self) -> bool:
        """vLLM's scheduler.has_unfinished_requests: something waiting or running."""
        return bool(self.s.running or self.s.waiting)

    @property
    def counts(self) -> tuple[int, int]:
        """(waiting, running) as the engine publishes them."""
        return len(self.s.waiting), len(self.s.running)

    def plan_step(self, clock: float) -> RankPlan | None:
        """Requests due by ``clock`` join; the scheduler's plan (None: nothing scheduled)."""
        s = self.s
        s.clock = clock
        self._release()
        if not s.running and not s.waiting:
            return None
        plan = self.sched.plan()
        if not plan.ids:
            self._no_step(plan)
            return None
        return RankPlan(plan, np.array(plan.ids, dtype=np.int64),
                        np.array(plan.new, dtype=np.int64), np.array(plan.ctx, dtype=np.int64),
                        sum(plan.new))

    def end_step(self, p: RankPlan | None, start: float, end: float) -> None:
        """The lockstep step ran from ``start`` to ``end``."""
        s = self.s
        if p is None:
            self._record(start, end, self._logical(None), 0)
            s.clock = end
            s.step += 1
        else:
            self._apply_step(p.plan, p.ids, p.new, p.ctx, start, end)
        if self.validate:
            check_books(s, self.pool)


class RankLoop(Lockstep):
    """A DP rank: arrivals come from the fleet's balancer (an inbox), steps from the fleet."""

    inbox: list[tuple[float, int]]

    def attach(self) -> None:
        self.inbox = []

    def add(self, t: float, r: int) -> None:
        heapq.heappush(self.inbox, (t, r))

    def _release(self) -> None:
        s = self.s
        while self.inbox and self.inbox[0][0] <= s.clock:
            r = heapq.heappop(self.inbox)[1]
            s.sent_s[r] = s.arrival[r]
            s.status[r] = WAITING
            s.waiting.append(r)

