"""The block pool's books, checked after every loop turn when simulate(validate=True)."""

from __future__ import annotations

from kvplan.sim.blocks import BlockPool
from kvplan.sim.state import SimState


def check_books(s: SimState, pool: BlockPool) -> None:
    """Blocks conserved: free (queue) + physically used == pool; refs match holders."""
    queued = sum(seg.count for seg in pool.queue)
    assert queued == pool.free, (queued, pool.free)
    holders: dict[int, int] = {}
    for copies in s.held_keys.values():
        for c in copies:
            holders[c] = holders.get(c, 0) + 1
    assert all(pool.ref[c] == h for c, h in holders.items())
    shared_extra = sum(h - 1 for h in holders.values())
    physical = int(s.held.sum()) - shared_extra
    assert physical + pool.free == pool.num_blocks, (physical, pool.free)
    assert 0 <= pool.used <= pool.num_blocks
