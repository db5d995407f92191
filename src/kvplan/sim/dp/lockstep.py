"""simulate_dp(): dp engines behind vLLM's DP load balancer, their MoE steps in lockstep.

vLLM 0.11 (``v1/engine/core.py`` DPEngineCoreProc.run_busy_loop): while a "wave" runs,
every DP rank steps; a rank with nothing scheduled runs a dummy batch, because the MoE
layers' collectives need every rank. Every 32 steps the ranks all-reduce whether any has
unfinished requests; the wave ends at the first such check where none has. A request
reaching an idle fleet starts a new wave. One lockstep step::

    each rank plans its batch (its own scheduler, token budget and KV pool)
    T_pad   = max over ranks of the scheduled tokens (1 if none: the dummy batch)
    rank r  = its batch priced at T_pad tokens (``kvplan.costs.step.parallel.dp_pad``)
    step    = max over ranks of rank r's seconds; every rank's step ends then

Requests reach the front end at arrival + the API delay and go to the rank the balancer
picks (``kvplan.sim.dp.balancer``); a rank admits them at its next step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from kvplan.costs.step.batch import StepTimer, idle_timer
from kvplan.costs.step.parallel.dp_pad import padded_step_s
from kvplan.errors import InputError
from kvplan.limits import MAX_FLEET_STATES
from kvplan.sim.blocks import KvShape
from kvplan.sim.dp.balancer import DpBalancer
from kvplan.sim.dp.merge import DpResult, merge_ranks
from kvplan.sim.dp.rank import Lockstep, RankLoop, RankPlan
from kvplan.sim.frontend import engine_arrivals
from kvplan.sim.inputs import check_arrivals
from kvplan.sim.scheduler import Limits
from kvplan.sim.state import REJECTED, WorkloadLike

WAVE_CHECK_STEPS = 32
"""DPEngineCoreProc._has_global_unfinished_reqs all-reduces only every 32 steps."""


class Waves:
    """Ranks stepped in lockstep and the wave's books: the aggregated DP fleet's and a
    disaggregated fleet's DP instance (sim/disagg/dp_instance.py) alike."""

    ranks: Sequence[Lockstep]
    timer: StepTimer
    lb: DpBalancer

    def _books(self) -> None:
        self.wave = False
        self.fresh = True  # the next step starts a wave: the engines were idle
        self._idle: StepTimer | None = None
        self.counter = 0
        self.rank_s: list[list[float]] = []
        self.padded: list[int] = []

    def _timer(self) -> StepTimer:
        """The step's timer: a wave's first step starts on idle engines (batch.idle_timer)."""
        if not self.fresh:
            return self.timer
        self.fresh = False
        if self._idle is None:
            self._idle = idle_timer(self.timer)
        return self._idle

    def _step(self, clock: float) -> float:
        """One lockstep step from ``clock``; returns its end."""
        secs, pad, end = step_ranks(self.ranks, self._timer(), clock)
        self.rank_s.append(secs)
        self.padded.append(pad)
        self.counter += 1
        if self.counter % WAVE_CHECK_STEPS == 0 and not any(e.unfinished for e in self.ranks):
            self.wave = False
            self.fresh = True
            self.counter = 0
        self.lb.publish(end, tuple(e.counts for e in self.ranks))
        return end


@dataclass(frozen=True, slots=True, kw_only=True)
class RankSim:
    """What every DP rank runs with (the ranks are identical engines)."""

    ranks: int
    timer: StepTimer
    num_blocks: int
    shape: KvShape
    limits: Limits
    max_model_len: int | None = None


def simulate_dp(workload: WorkloadLike, sim: RankSim, *, validate: bool = False,
                progress: Callable[[int, int], None] | None = None) -> DpResult:
    """Replay ``workload`` on ``sim.ranks`` lockstep DP engines (module docstring);
    ``progress(done, total)`` every 4096 steps and at the end (callers stop a run there)."""
    if sim.ranks < 1:
        raise InputError(f"--data-parallel-size must be at least 1, got {sim.ranks}")
    if sim.num_blocks < 2:
        raise InputError(f"the KV pool must have at least two blocks (one is vLLM's null "
                         f"block), got {sim.num_blocks}")
    check_arrivals(workload)
    if workload.closed_loop_concurrency:
        raise InputError("--max-concurrency is not modelled for a data-parallel fleet yet; "
                         "give --request-rate instead")
    n = len(workload.prompt_tokens)
    if sim.ranks * n > MAX_FLEET_STATES:  # each rank keeps every request's state (~260 B)
        raise InputError(
            f"--data-parallel-size {sim.ranks} x {n:,} requests = {sim.ranks * n:,} request "
            f"states (each DP rank keeps every request's, ~260 B); kvplan simulates at most "
            f"{MAX_FLEET_STATES:,}: give at most {MAX_FLEET_STATES // sim.ranks:,} requests "
            "(--num-prompts) or fewer ranks")
    return _Fleet(workload, sim, validate, progress).run()


def _rank(workload: WorkloadLike, sim: RankSim, validate: bool) -> RankLoop:
    loop = RankLoop(workload=workload, timer=sim.timer, shape=sim.shape, limits=sim.limits,
                    num_blocks=sim.num_blocks, max_model_len=sim.max_model_len,
                    shared_prefix_tokens=0, fast=False, progress=None)
    loop.attach()
    loop.validate = validate
    return loop


class _Fleet(Waves):
    """The balancer, the ranks and the wave; the clock is the fleet's (one for all)."""

    ranks: list[RankLoop]

    def __init__(self, workload: WorkloadLike, sim: RankSim, validate: bool,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.progress = progress
        self.ranks = [_rank(workload, sim, validate) for _ in range(sim.ranks)]
        self.timer = sim.timer
        self.lb = DpBalancer(sim.ranks)
        first = self.ranks[0]
        self.rejected = dict(first.reasons)
        arrival = np.asarray(workload.arrival_s, dtype=np.float64)
        # vLLM 0.11.0 serves a DP fleet from one API server (--api-server-count 1 by
        # default): its serial admission, then the parallel path (sim/frontend.py)
        at = engine_arrivals(sim.timer, arrival, first.s.prompt)
        self.order: list[int] = np.argsort(at, kind="stable").tolist()
        self.at: list[float] = at.tolist()
        self.ptr = 0
        self.rank_of = np.full(len(arrival), -1, dtype=np.int64)
        self._books()

    def _route(self, clock: float) -> None:
        """Every request reaching the front end by ``clock`` goes to its rank's inbox."""
        while self.ptr < len(self.order) and self.at[self.order[self.ptr]] <= clock:
            r = self.order[self.ptr]
            self.ptr += 1
            if r in self.rejected:  # the API server refuses it before routing
                s = self.ranks[0].s
                s.status[r] = REJECTED
                s.reject_reason[r] = self.rejected[r]
                s.sent_s[r] = s.arrival[r]
                continue
            k = self.lb.pick(self.at[r])
            self.rank_of[r] = k
            self.ranks[k].add(self.at[r], r)

    def _next_event(self) -> float:
        nxt = self.at[self.order[self.ptr]] if self.ptr < len(self.order) else math.inf
        return min([nxt, *(e.inbox[0][0] for e in self.ranks if e.inbox)])

    def run(self) -> DpResult:
        clock = 0.0
        while True:
            self._route(clock)
            due = any(e.unfinished or (e.inbox and e.inbox[0][0] <= clock)
                      for e in self.ranks)
            if not due and not self.wave:
                t = self._next_event()
                if t == math.inf:
                    break
                clock = max(clock, t)
                continue
            self.wave = True
            clock = self._step(clock)
            if self.progress is not None and len(self.padded) % 4096 == 0:
                self.progress(self._done(), len(self.at))
        if self.progress is not None:
            self.progress(self._done(), len(self.at))
        return merge_ranks([e._result() for e in self.ranks], self.rank_of, self.rejected,
                           np.array(self.rank_s, dtype=np.float64).reshape(-1, len(self.ranks)),
                           np.array(self.padded, dtype=np.int64))

    def _done(self) -> int:
        return sum(e.done for e in self.ranks) + len(self.rejected)



def step_ranks(ranks: Sequence[Lockstep], timer: StepTimer, clock: float
               ) -> tuple[list[float], int, float]:
    """One lockstep step of ``ranks`` from ``clock`` (module docstring): every rank plans,
    each is priced at the widest rank's tokens, all end at the slowest rank's end.
    Returns (each rank's seconds, the padded tokens, the end)."""
    plans: list[RankPlan | None] = [e.plan_step(clock) for e in ranks]
    pad = max([1, *(p.tokens for p in plans if p is not None)])
    empty = np.zeros(0, dtype=np.int64)
    secs = [padded_step_s(timer, empty if p is None else p.new,
                          empty if p is None else p.ctx, pad) for p in plans]
    end = clock + max(secs)
    for e, p in zip(ranks, plans, strict=True):
        e.end_step(p, clock, end)
    return secs, pad, end
