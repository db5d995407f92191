"""A data-parallel instance of a disaggregated fleet: dp ranks in lockstep behind one front end.

vLLM serves such an instance (e.g. a DP=8 EP decode instance: DP attention, EP MoE) as one
``vllm serve --data-parallel-size N``: the proxy sends a request to the instance, its front
end sends it to a rank (``kvplan.sim.dp.balancer``: the least 4 x waiting + running, from
the coordinator's 100 ms snapshots), and the ranks step in lockstep as the aggregated DP
fleet's do (``kvplan.sim.dp.lockstep.step_ranks``: a step is the slowest rank's, each
priced at the widest rank's tokens; an idle rank runs a dummy batch while the wave lasts;
the wave ends at a 32-step check that finds no rank with work). Each rank is a prefill or
decode instance's loop (instances.py) with its own scheduler and KV pool::

    prefill rank  runs the prompt; its blocks stay held on this rank until the fleet's
                  release (the transfer out of this rank's GPUs ended)
    decode rank   pending -> the whole prompt's blocks on this rank -> the transfer into
                  this rank's GPUs -> running; it has work (the wave goes on, dummy steps
                  included) while anything is pending, moving, ready, waiting or running
                  (vLLM keeps WAITING_FOR_REMOTE_KVS requests in its waiting queue)

A turn is one lockstep step from the instance's clock (the fleet runs the instance whose
next action is earliest, so no horizon is needed), or, outside a wave with nothing due,
the releases due at its clock.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from kvplan.sim.disagg.instances import DecodeLoop, PrefillLoop
from kvplan.sim.dp.balancer import DpBalancer
from kvplan.sim.dp.lockstep import Waves
from kvplan.sim.dp.merge import DpResult, merge_ranks
from kvplan.sim.dp.rank import Lockstep
from kvplan.sim.result import SimulationResult
from kvplan.sim.state import SimState


class PrefillRank(Lockstep, PrefillLoop):
    """A prefill instance's loop stepped by its DP instance (Lockstep's ``unfinished`` and
    ``counts``: held blocks awaiting a transfer are not work)."""


class DecodeRank(Lockstep, DecodeLoop):
    """A decode instance's loop stepped by its DP instance."""

    @property
    def unfinished(self) -> bool:
        s = self.s
        return bool(s.running or s.waiting or self.pending or self.transfers or self.ready)

    @property
    def counts(self) -> tuple[int, int]:
        """(waiting, running): vLLM's waiting queue holds the requests awaiting their KV."""
        waiting = len(self.s.waiting) + len(self.pending) + len(self.transfers)
        return waiting + len(self.ready), len(self.s.running)


class DpInstance(Waves):
    """dp ranks (PrefillRank or DecodeRank) behind the instance's DP load balancer."""

    ranks: list[Any]
    horizon: float = math.inf
    """Unused (one lockstep step per turn); the fleet sets it on every instance."""

    def __init__(self, ranks: list[Any], timer: Any) -> None:
        self.ranks = ranks
        self.timer = timer
        self.s: SimState = ranks[0].s
        """Rank 0's state: its clock is every rank's (lockstep)."""
        self.reasons = ranks[0].reasons
        self.inbox: list[tuple[float, int]] = []
        self.lb = DpBalancer(len(ranks))
        self.rank_of = np.full(len(self.s.arrival), -1, dtype=np.int64)
        self._books()
        self.dp: DpResult | None = None

    def attach(self, *callbacks: Any) -> None:
        for e in self.ranks:
            e.attach(*callbacks)

    def add(self, t: float, r: int) -> None:
        heapq.heappush(self.inbox, (t, r))

    def release(self, t: float, r: int) -> None:
        """r's KV left the prefill rank that holds it (a prefill instance only)."""
        self.ranks[int(self.rank_of[r])].release(t, r)

    def rank(self, r: int) -> int:
        """The rank r was sent to."""
        return int(self.rank_of[r])

    def next_time(self) -> float:
        clock = self.s.clock
        if self.wave or self._due(clock):
            return clock
        t = self.next_event()
        return t if t > clock else clock

    def next_event(self) -> float:
        t = self.inbox[0][0] if self.inbox else math.inf
        return float(min([t, *(e.next_event() for e in self.ranks)]))

    def _due(self, clock: float) -> bool:
        if self.inbox and self.inbox[0][0] <= clock:
            return True
        return any(e.unfinished or (e.inbox and e.inbox[0][0] <= clock) for e in self.ranks)

    def wake(self, t: float) -> None:
        if not self.wave:
            for e in self.ranks:
                e.s.clock = max(e.s.clock, t)

    def turn(self) -> None:
        """Requests due go to their ranks; then one lockstep step (a wave runs or starts),
        or only the releases due now."""
        clock = self.s.clock
        while self.inbox and self.inbox[0][0] <= clock:
            t, r = heapq.heappop(self.inbox)
            k = self.lb.pick(t)
            self.rank_of[r] = k
            self.ranks[k].add(t, r)
        if not self.wave and not self._due(clock):
            for e in self.ranks:
                e._release()
            return
        self.wave = True
        self._step(clock)

    # ------------------------------------------------------------ the fleet's books

    def merged(self, name: str) -> Any:
        """A per-request array of the ranks (e.g. ``admit_s``), each from its request's rank."""
        out = getattr(self.ranks[0], name).copy()
        for k, e in enumerate(self.ranks[1:], 1):
            mine = self.rank_of == k
            out[mine] = getattr(e, name)[mine]
        return out

    @property
    def admit_s(self) -> Any:
        return self.merged("admit_s")

    @property
    def arrive_s(self) -> Any:
        return self.merged("arrive_s")

    @property
    def starved(self) -> Any:
        return self.merged("starved")

    def _result(self) -> SimulationResult:
        """The instance as one result (ranks merged, sim/dp/merge.py); ``self.dp`` keeps
        the ranks' own."""
        k = len(self.ranks)
        self.dp = merge_ranks([e._result() for e in self.ranks], self.rank_of, {},
                              np.array(self.rank_s, dtype=np.float64).reshape(-1, k),
                              np.array(self.padded, dtype=np.int64))
        return self.dp.fleet

