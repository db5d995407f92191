"""vLLM's per-request ``itls`` (--save-detailed) built a few tens of thousands of tokens at a
time from the token emission runs. As Python lists every gap of a run was held at once
(~170 B a token: 1e7 output tokens took 1.7 GB; 1e8, inside the limits, more than a machine
has); here the memory is the runs' (O(requests)) plus one chunk."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from kvplan.sim.result import BoolArray, FloatArray, IntArray, SimulationResult, concat_ranges

CHUNK_TOKENS = 1 << 16
"""Token times gathered at a time (a request with more is a chunk of its own)."""


@dataclass(frozen=True, slots=True)
class ItlRows:
    """Row i: the gaps (s) between request i's consecutive tokens; [] for a failed one."""

    ends: FloatArray
    """Every step's end (s): the token times."""
    first: IntArray
    last: IntArray
    """The emission runs' first and last steps, by request then step."""
    run_lo: IntArray
    """Request i's runs are first[run_lo[i]:run_lo[i + 1]]."""
    tokens: IntArray
    finished: BoolArray

    def row_chunks(self, tokens: int = CHUNK_TOKENS) -> Iterator[list[FloatArray]]:
        """The rows in request order, a list of arrays for about ``tokens`` tokens at a time."""
        cum = np.concatenate(([0], np.cumsum(self.tokens)))
        n, a = len(self.tokens), 0
        while a < n:
            b = min(max(int(np.searchsorted(cum, cum[a] + tokens, side="right")) - 1, a + 1), n)
            yield self._rows(a, b)
            a = b

    def _rows(self, a: int, b: int) -> list[FloatArray]:
        lo, hi = self.run_lo[a], self.run_lo[b]
        first, last = self.first[lo:hi], self.last[lo:hi]
        flat = self.ends[concat_ranges(first, last - first + 1)]
        counts = self.tokens[a:b]
        gaps = np.diff(flat)
        ends = np.cumsum(counts)
        keep = np.ones(len(gaps), dtype=bool)
        keep[ends[(counts > 0) & (ends < len(flat))] - 1] = False  # last token -> next request
        rows = np.split(gaps[keep], np.cumsum(np.maximum(counts - 1, 0))[:-1])
        return [row if done else rows[0][:0] for row, done in
                zip(rows, self.finished[a:b].tolist(), strict=True)]

    def tolist(self) -> list[list[float]]:
        """Every row as Python lists (what json_out.dumps writes)."""
        return [row.tolist() for chunk in self.row_chunks() for row in chunk]


def itl_rows(r: SimulationResult) -> ItlRows:
    """Gaps between consecutive tokens of each completed request (vLLM's ``itls``), every
    request in order, a failed one with none: one diff over a chunk's token times, the gaps
    across two requests cut."""
    req, first, last = r.emission_runs()
    run_lo = np.searchsorted(req, np.arange(r.num_requests + 1))
    tokens = np.bincount(req, weights=last - first + 1, minlength=r.num_requests)
    return ItlRows(r.steps.end_s, first, last, run_lo, tokens.astype(np.int64), r.finished)
