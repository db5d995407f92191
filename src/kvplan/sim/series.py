"""Per-step columns of a simulation in growable numpy buffers (runs written as slices)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvplan.sim.result import KvSeries


class StepSeries:
    """Per-step columns in growable numpy buffers (runs are written as slices)."""

    __slots__ = ("cap", "cols", "n")

    def __init__(self) -> None:
        self.n = 0
        self.cap = 1024
        self.cols: list[Any] = [np.zeros(1024), np.zeros(1024)] + [np.zeros(1024, dtype=np.int64)
                                                        for _ in range(5)]

    def _room(self, k: int) -> None:
        if self.n + k > self.cap:
            self.cap = max(2 * self.cap, self.n + k)
            grown = []
            for c in self.cols:  # np.resize would also fill the new room by repeating
                g = np.empty(self.cap, dtype=c.dtype)
                g[:self.n] = c[:self.n]
                grown.append(g)
            self.cols = grown

    def add(self, *values: float) -> None:
        """One step: start, end, used blocks, logical bytes, running, waiting, new tokens."""
        i = self.n
        if i >= self.cap:
            self._room(1)
        c = self.cols
        c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], c[5][i], c[6][i] = values
        self.n = i + 1

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
