"""The block pool's books, checked after every loop turn when simulate(validate=True)."""

from __future__ import annotations

from kvplan.sim.blocks import BlockPool
from kvplan.sim.scheduler import DUP
from kvplan.sim.state import SimState


def check_books(s: SimState, pool: BlockPool) -> None:
    """Blocks conserved: free (queue) + physically used == pool; refs match holders."""
    queued = sum(seg.count for seg in pool.queue)
    assert queued == pool.free, (queued, pool.free)
    holders: dict[int, int] = {}
    for keys in s.held_keys.values():
        for k in keys:
            if k != DUP:
                holders[k] = holders.get(k, 0) + 1
    assert all(pool.ref[k] == h for k, h in holders.items())
    shared_extra = sum(h - 1 for h in holders.values())
    physical = int(s.held.sum()) - shared_extra
    assert physical + pool.free == pool.num_blocks, (physical, pool.free)
    assert 0 <= pool.used <= pool.num_blocks
