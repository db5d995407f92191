"""vLLM's data-parallel load balancer: the engine with the least 4 x waiting + running.

vLLM 0.11 ``v1/engine/core_client.py`` DPLBAsyncMPClient.get_core_engine_for_request:
scans the engines from its start index (0 for one API server), takes the first with the
lowest ``waiting * 4 + running`` and adds one to that engine's waiting count locally ("for
better balancing between stats updates from the coordinator (which happen every 100ms)").
The counts are the engines' scheduler counts (``_maybe_publish_request_counts`` after each
step, only when they changed), which ``v1/engine/coordinator.py`` forwards to the front end
every ``stats_update_interval_ms`` = 100 ms; a forwarded snapshot replaces the local
counts whole. kvplan puts the forwards on a 100 ms grid from t = 0.
"""

from __future__ import annotations

import math
from collections import deque

STATS_INTERVAL_S = 0.1
"""The coordinator's stats_update_interval_ms (100) in seconds."""

WAITING_WEIGHT = 4


class DpBalancer:
    """The front end's view of the engines' (waiting, running) counts and its picks."""

    def __init__(self, ranks: int, interval_s: float = STATS_INTERVAL_S) -> None:
        self.view = [[0, 0] for _ in range(ranks)]
        self.interval_s = interval_s
        self.pubs: deque[tuple[float, tuple[tuple[int, int], ...]]] = deque()
        # the engines start from (0, 0) as last published (vLLM seeds last_counts so)
        self.last: tuple[tuple[int, int], ...] = tuple((0, 0) for _ in range(ranks))
        self.tick = 0
        self.picks: list[int] = []

    def publish(self, t: float, counts: tuple[tuple[int, int], ...]) -> None:
        """The engines' counts after a step ending at ``t``, kept only when one engine's
        changed (each engine publishes on a change; the coordinator forwards them all)."""
        if counts != self.last:
            self.last = counts
            self.pubs.append((t, counts))

    def pick(self, t: float) -> int:
        """The engine a request reaching the front end at ``t`` goes to."""
        self._refresh(t)
        scores = [WAITING_WEIGHT * w + r for w, r in self.view]
        best = scores.index(min(scores))  # the first lowest from index 0
        self.view[best][0] += 1
        self.picks.append(best)
        return best

    def _refresh(self, t: float) -> None:
        """Apply the coordinator's latest forward at or before ``t``: the newest snapshot
        published by that grid time, if newer than the one the view was built from."""
        k = math.floor(t / self.interval_s + 1e-9)
        if k <= self.tick:
            return
        self.tick = k
        at = k * self.interval_s
        snap = None
        while self.pubs and self.pubs[0][0] <= at:
            snap = self.pubs.popleft()[1]
        if snap is not None:
            self.view = [list(c) for c in snap]
