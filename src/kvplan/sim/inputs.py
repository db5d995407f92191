"""simulate()'s inputs: the KV shape a model's cache takes in the pool, the workload's arrival
times, and the note where a shared prefix would hit in vLLM but is not modelled here."""

from __future__ import annotations

import numbers

import numpy as np

from kvplan.errors import InputError
from kvplan.limits import MAX_TOKENS, check_int
from kvplan.sim.blocks import KvShape, kv_shape_from
from kvplan.sim.scheduler import Limits
from kvplan.sim.state import WorkloadLike
from kvplan.specs.kv import ModelKv


def note_unmodelled_hits(shape: KvShape, lim: Limits, workload: WorkloadLike,
                         shared_prefix_tokens: int) -> None:
    """Prefix-cache hits are modelled for one full-attention group (Scheduler.simple): say so
    where a shared prefix would hit in vLLM 0.11 (sliding windows; it turns prefix caching off
    for state layers) but reads 0 here (docs/simulator.md)."""
    kinds = {g.kind for g in shape.groups}
    if not lim.prefix_caching or "sliding" not in kinds or "state" in kinds:
        return
    if shared_prefix_tokens or getattr(workload, "prefix_hashes", None) is not None:
        from kvplan.notes import note

        note("prefix-cache hits are not modelled for sliding-window KV groups: the shared "
             "prefix is recomputed, the hit rate reads 0 and TTFT is that of uncached prompts "
             "(vLLM 0.11 would hit it)")


def kv_shape(kv: ModelKv | KvShape | None, block_size: int) -> KvShape:
    """How many pool blocks a request takes: one full-attention group by default."""
    if kv is None:
        return KvShape(block_size=block_size)
    if isinstance(kv, KvShape):
        if kv.block_size != block_size:
            raise InputError(f"KvShape block size {kv.block_size} != --block-size {block_size}")
        return kv
    return kv_shape_from(kv, block_size)


def check_arrivals(workload: WorkloadLike, *, in_order: bool = False) -> None:
    """Finite arrival seconds >= 0 (a NaN one never arrived: the run never ended); ``in_order``
    (a closed loop: its clients send the requests in list order) ascending too. Open loops
    release requests in arrival order (``frontend.plan_front_end``)."""
    t = np.asarray(workload.arrival_s, dtype=np.float64)
    if len(t) and not (bool(np.all(np.isfinite(t))) and float(t.min()) >= 0.0):
        raise InputError("workload: arrival times must be finite seconds >= 0")
    if in_order and len(t) > 1 and bool(np.any(np.diff(t) < 0)):
        raise InputError("workload: a closed loop (max concurrency) sends requests in list "
                         "order, so arrival times must be sorted ascending")


def check_pool(num_blocks: int, block_size: int) -> None:
    """A whole number of blocks, two at least (one is vLLM's null block), and a block size."""
    check_int("block_size", block_size, 1, MAX_TOKENS, where="simulate")
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, numbers.Integral):
        raise InputError(f"simulate: num_blocks must be a whole number of KV blocks, got "
                         f"{num_blocks!r}")
    if num_blocks < 2:
        raise InputError(f"the KV pool must have at least two blocks (one is vLLM's null "
                         f"block), got {num_blocks}")
