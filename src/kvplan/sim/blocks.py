"""The paged KV block pool: free count, LRU free queue, prefix cache with reference counts.

A request's blocks, block size B = 4 (``S`` shared-content block, ``U`` its own content)::

    tokens  |0 1 2 3|4 5 6 7|8 9 . .|
    blocks  |  S0   |  U1   |  U2   |     U2 is partial: never cached, freed anonymous

Freed blocks join the tail of one free queue; new blocks are taken from its head (vLLM's
``FreeKVCacheBlockQueue``), evicting whatever cached content they held. A cached block that a
request hits while it sits in the queue is taken out of the queue ("touched"). The queue is
held as segments, not single blocks, so a decode run can take thousands of blocks in one call:

    ('anon', n)        n free blocks without reusable content
    ('shared', copy)   one free cached block of shared content (a copy of a prefix key's
                       block) other requests can hit
    ('own', rid, n)    the n full blocks of preempted request rid beyond its shared prefix;
                       only rid itself can hit them when it is rescheduled (recompute)

As in vLLM 0.11 (BlockHashToBlockMap, no de-duplication), a key's content may be cached in
several blocks ("copies"): a request that computes a block whose content another request
cached already caches its own copy. A lookup hits the first copy cached that is still
cached; evicting a copy leaves the others.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.specs.kv import ModelKv, vllm_group_size
from kvplan.units import cdiv

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheGroup:
    """One KV cache group as the pool sees it: pool blocks per logical block, window, bytes."""

    kind: str = "full"
    """'full' (also MLA), 'sliding' or 'state'."""
    window: int = 0
    weight: int = 1
    """Pool blocks this group takes per block of tokens (vLLM splits big groups in equal ones)."""
    bytes_per_token: int = 0
    state_bytes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class KvShape:
    """How many pool blocks and logical bytes a request holding t tokens takes (vectorised)."""

    block_size: int
    groups: tuple[CacheGroup, ...] = (CacheGroup(),)
    merged: tuple[CacheGroup, ...] = field(init=False, repr=False, compare=False)
    """``groups`` with equal (kind, window) ones merged, weights and bytes added: every
    count below is a sum of the same integers over fewer groups (gemma-3-27b-it: 7 -> 2)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "merged", merge_groups(self.groups))

    @property
    def full_only(self) -> bool:
        return all(g.kind == "full" for g in self.groups)

    def blocks(self, tokens: IntArray, before: IntArray | None = None) -> IntArray:
        """Pool blocks held after a step that brought requests from ``before`` computed tokens
        to ``tokens`` slots (any array shape); ``before`` defaults to ``tokens - 1`` (decode).

        vLLM's allocate_slots frees sliding-window blocks on the tokens computed *before* the
        step (remove_skipped_blocks(request.num_computed_tokens)), then allocates up to
        ``tokens``: a prefill chunk holds every block it writes until the next step.
        """
        b = self.block_size
        if before is None:
            before = tokens - 1
        total = np.zeros_like(tokens)
        for g in self.merged:
            total += g.weight * _group_blocks(g, tokens, before, b)
        return total

    def blocks_one(self, tokens: int, before: int | None = None) -> int:
        """``blocks`` for one request, in plain int arithmetic (the same rule per group)."""
        b = self.block_size
        if before is None:
            before = tokens - 1
        total = 0
        for g in self.merged:
            if g.kind == "state":
                total += g.weight * (tokens > 0)
                continue
            n = cdiv(tokens, b)
            if g.kind == "sliding":
                n -= max(before - g.window + 1, 0) // b
            total += g.weight * n
        return total

    def logical_bytes(self, tokens: IntArray) -> IntArray:
        """Bytes of KV the cached tokens really occupy (windows applied, pages not rounded)."""
        total = np.zeros_like(tokens)
        for g in self.merged:
            if g.kind == "state":
                total += (tokens > 0) * g.state_bytes
            elif g.kind == "sliding":
                total += np.minimum(tokens, g.window) * g.bytes_per_token
            else:
                total += tokens * g.bytes_per_token
        return total


def _group_blocks(g: CacheGroup, tokens: IntArray, before: IntArray, b: int) -> IntArray:
    if g.kind == "state":
        return (tokens > 0).astype(np.int64)
    blocks = -(-tokens // b)
    if g.kind == "sliding":
        # vLLM's SlidingWindowManager.remove_skipped_blocks(num_computed_tokens) frees the
        # blocks before (num_computed_tokens - window + 1) // B; for a decode step
        # (before = tokens - 1) that is max(tokens - window, 0) // B.
        blocks = blocks - np.maximum(before - g.window + 1, 0) // b
    return blocks


def merge_groups(groups: Sequence[CacheGroup]) -> tuple[CacheGroup, ...]:
    """Groups with equal (kind, window) as one: the same blocks per group, so weights add;
    logical bytes are per group, so bytes add (first-seen order kept)."""
    out: dict[tuple[str, int], CacheGroup] = {}
    for g in groups:
        key = (g.kind, g.window if g.kind == "sliding" else 0)
        had = out.get(key)
        out[key] = g if had is None else CacheGroup(
            kind=g.kind, window=key[1], weight=had.weight + g.weight,
            bytes_per_token=had.bytes_per_token + g.bytes_per_token,
            state_bytes=had.state_bytes + g.state_bytes)
    return tuple(out.values())


def kv_shape_from(kv: ModelKv, block_size: int) -> KvShape:
    """KvShape of a model: each ModelKv group becomes ceil(layers / L) pool groups.

    L is ``vllm_group_size`` (ModelKv.blocks_for's rule): vLLM 0.11 cuts every spec's layers,
    Mamba / linear-attention state layers included, into equal-size KV cache groups sharing
    one pool, so a block of the pool is one page in each of L layers, and each group of state
    layers holds one block per request (Qwen3-Next: 36 state + 12 full layers, 3 + 1 groups).
    """
    unit = vllm_group_size([g.num_layers for g in kv.groups] or [1])
    groups = []
    for g in kv.groups:
        spec = g.spec
        kind = "full" if spec.kind in ("full", "mla") else spec.kind
        window = getattr(spec, "window", 0)
        weight = cdiv(g.num_layers, unit)
        groups.append(CacheGroup(
            kind=kind, window=window, weight=weight,
            bytes_per_token=g.bytes_per_token, state_bytes=g.state_bytes,
        ))
    return KvShape(block_size=block_size, groups=tuple(groups) or (CacheGroup(),))


def kv_shape_from_groups(groups: Sequence[Any], block_size: int) -> KvShape:
    """KvShape from vLLM's KV cache groups (``MemoryPlan.groups``: .spec, .layer_ids).

    Every group takes one pool block per block of tokens (vLLM's groups are equal-sized).
    """
    out = []
    for g in groups:
        spec, n = g.spec, len(g.layer_ids)
        kind = "full" if spec.kind in ("full", "mla") else spec.kind
        out.append(CacheGroup(kind=kind, window=getattr(spec, "window", 0), weight=1,
                              bytes_per_token=n * spec.bytes_per_token,
                              state_bytes=n * spec.state_bytes))
    return KvShape(block_size=block_size, groups=tuple(out) or (CacheGroup(),))


@dataclass(slots=True)
class _Segment:
    kind: str
    count: int
    key: int = -1
    rid: int = -1


@dataclass(slots=True)
class BlockPool:
    """Free-block accounting plus the prefix cache (keys -> cached copies -> references)."""

    num_blocks: int
    free: int = 0
    queue: deque[_Segment] = field(default_factory=deque)
    copies: dict[int, dict[int, None]] = field(default_factory=dict)
    """Shared key -> its cached copies (ids), in the order they were cached."""
    ref: dict[int, int] = field(default_factory=dict)
    """Cached copy -> number of requests holding it (0: evictable, in the queue)."""
    copy_key: dict[int, int] = field(default_factory=dict)
    copy_segment: dict[int, _Segment] = field(default_factory=dict)
    next_copy: int = 0
    own: dict[int, _Segment] = field(default_factory=dict)
    """Preempted request id -> its queued 'own' segment (count shrinks as blocks are evicted)."""

    def __post_init__(self) -> None:
        self.free = self.num_blocks
        self.queue.append(_Segment("anon", self.num_blocks))

    @property
    def used(self) -> int:
        return self.num_blocks - self.free

    def take(self, n: int) -> None:
        """Take n free blocks from the queue head, evicting the cached content they held."""
        assert 0 <= n <= self.free, (n, self.free)
        self.free -= n
        while n > 0:
            seg = self.queue[0]
            got = min(n, seg.count)
            seg.count -= got
            n -= got
            if seg.count == 0:
                self.queue.popleft()
                self._evicted(seg)

    def _evicted(self, seg: _Segment) -> None:
        if seg.kind == "shared" and self.copy_segment.get(seg.key) is seg:
            c = seg.key  # this copy only; the key's other copies stay cached
            del self.copy_segment[c], self.ref[c]
            key = self.copy_key.pop(c)
            same = self.copies[key]
            del same[c]
            if not same:
                del self.copies[key]
        elif seg.kind == "own" and self.own.get(seg.rid) is seg:
            del self.own[seg.rid]

    def give_anon(self, n: int) -> None:
        """Return n blocks without reusable content to the queue tail."""
        if n <= 0:
            return
        self.free += n
        tail = self.queue[-1] if self.queue else None
        if tail is not None and tail.kind == "anon":
            tail.count += n
        else:
            self.queue.append(_Segment("anon", n))

    def give_own(self, rid: int, n: int) -> None:
        """Queue the n own full blocks of preempted request rid (it may hit them later)."""
        if n <= 0:
            return
        self.free += n
        seg = _Segment("own", n, rid=rid)
        self.queue.append(seg)
        self.own[rid] = seg

    def release(self, c: int) -> None:
        """Drop one reference to a cached copy; at zero it joins the free queue."""
        self.ref[c] -= 1
        if self.ref[c] == 0:
            self.free += 1
            seg = _Segment("shared", 1, key=c)
            self.queue.append(seg)
            self.copy_segment[c] = seg

    def register(self, key: int) -> int:
        """Cache a freshly computed shared block held by one request: a new copy of the key
        (vLLM 0.11 caches it even if another copy is cached); its id."""
        c = self.next_copy
        self.next_copy = c + 1
        self.ref[c] = 1
        self.copy_key[c] = key
        self.copies.setdefault(key, {})[c] = None
        return c

    def own_cached(self, rid: int) -> int:
        seg = self.own.get(rid)
        return 0 if seg is None else seg.count

    def room_before(self, hits: list[int], own_rid: int) -> int:
        """Free blocks ahead, in the queue, of the first of these hit copies that is free
        (and of own_rid's own blocks, -1: none): taking no more from the head keeps all."""
        mark = {id(self.copy_segment[c]) for c in hits if self.ref[c] == 0}
        if own_rid >= 0:
            mark.add(id(self.own[own_rid]))
        if not mark:
            return self.free
        n = 0
        for q in self.queue:
            if id(q) in mark:
                return n
            n += q.count
        raise AssertionError(own_rid)

    def evictable_hits(self, hits: list[int]) -> int:
        """How many of these cached copies sit in the free queue (a hit on them costs a block)."""
        return sum(1 for c in hits if self.ref[c] == 0)

    def touch(self, hits: list[int], own_rid: int, own_blocks: int) -> None:
        """Take hit copies: referenced +1; evictable ones (and own blocks) leave the queue."""
        for c in hits:
            if self.ref[c] == 0:
                seg = self.copy_segment.pop(c)
                seg.count = 0
                self.free -= 1
            self.ref[c] += 1
        if own_blocks:
            seg = self.own.pop(own_rid)
            seg.count -= own_blocks
            seg.kind = "anon"  # any rest can never be hit: the chain stops at the hit limit
            self.free -= own_blocks
        self._drop_dead_head()

    def forget_own(self, rid: int) -> None:
        """A request's own cached blocks can never be hit again: they become anonymous."""
        seg = self.own.pop(rid, None)
        if seg is not None:
            seg.kind = "anon"

    def _drop_dead_head(self) -> None:
        while self.queue and self.queue[0].count == 0:
            self.queue.popleft()
