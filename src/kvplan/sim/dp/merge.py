"""The DP fleet's result: the ranks' results merged into one (as a client sees the fleet).

Each request's timestamps come from the rank that served it; the ranks' step records share
their boundaries (lockstep), so the fleet's step k is every rank's step k, with KV blocks,
running and waiting summed over the ranks and the token emission runs kept as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kvplan.sim.result import FloatArray, IntArray, KvSeries, SimulationResult


@dataclass(frozen=True, slots=True, kw_only=True)
class DpResult:
    """A lockstep DP simulation: the fleet as one result, each rank's own, the step prices."""

    fleet: SimulationResult
    ranks: tuple[SimulationResult, ...]
    rank_of: IntArray
    """The DP rank each request went to (-1: rejected before routing)."""
    rank_step_s: FloatArray
    """steps x ranks: each rank's own step seconds (the step took the row's max)."""
    padded_tokens: IntArray
    """Per step: the tokens every rank ran (the widest rank's, at least 1)."""

    @property
    def peak_kv_blocks_per_rank(self) -> tuple[int, ...]:
        return tuple(r.peak_kv_blocks for r in self.ranks)

    @property
    def dummy_steps_per_rank(self) -> tuple[int, ...]:
        """Steps each rank ran with nothing scheduled (vLLM's dummy batch)."""
        return tuple(int(np.count_nonzero(r.steps.new_tokens == 0)) for r in self.ranks)


_PER_REQUEST = ("sent_s", "scheduled_s", "first_token_s", "finish_s", "preemptions",
                "prefix_hit_tokens", "finished")


def merge_ranks(ranks: list[SimulationResult], rank_of: IntArray, rejected: dict[int, str],
                rank_step_s: FloatArray, padded: IntArray) -> DpResult:
    """One result for the fleet (module docstring)."""
    base = ranks[0]
    owner = np.where(rank_of < 0, 0, rank_of)
    fields: dict[str, Any] = {}
    for name in _PER_REQUEST:
        cols = np.stack([getattr(r, name) for r in ranks])
        fields[name] = cols[owner, np.arange(len(owner))]
    segs = [np.concatenate([getattr(r, f) for r in ranks]) for f in
            ("seg_req", "seg_first", "seg_last")]
    fleet = replace(base, **fields, rejected={i: rejected[i] for i in sorted(rejected)},
                    steps=_steps(ranks), seg_req=segs[0], seg_first=segs[1],
                    seg_last=segs[2],
                    preemption_s=np.sort(np.concatenate([r.preemption_s for r in ranks])),
                    num_blocks=sum(r.num_blocks for r in ranks),
                    null_blocks=sum(r.null_blocks for r in ranks),
                    prefill_claimed_blocks=sum(r.prefill_claimed_blocks for r in ranks),
                    decode_claimed_blocks=sum(r.decode_claimed_blocks for r in ranks),
                    prefix_query_tokens=sum(r.prefix_query_tokens for r in ranks),
                    prefix_lookup_hits=sum(r.prefix_lookup_hits for r in ranks))
    return DpResult(fleet=fleet, ranks=tuple(ranks), rank_of=rank_of,
                    rank_step_s=rank_step_s, padded_tokens=padded)


def _steps(ranks: list[SimulationResult]) -> KvSeries:
    s0 = ranks[0].steps
    for r in ranks[1:]:
        assert np.array_equal(r.steps.end_s, s0.end_s), "DP ranks left lockstep"

    def total(name: str) -> IntArray:
        out: IntArray = np.add.reduce([getattr(r.steps, name) for r in ranks])
        return out

    return KvSeries(start_s=s0.start_s, end_s=s0.end_s, used_blocks=total("used_blocks"),
                    logical_bytes=total("logical_bytes"), running=total("running"),
                    waiting=total("waiting"), new_tokens=total("new_tokens"))
