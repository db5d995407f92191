"""An independent model of vLLM 0.11.0's v1 scheduler and block pool, block by block (one
full-attention KV group, FCFS), to compare kvplan's simulator with (tests/test_hunt13_sched.py).

Written from vLLM's rules (scheduler.py, kv_cache_manager.py, block_pool.py), not from
kvplan's code: real block ids, a free queue of blocks (block 0 is the null block), a
hash -> block map, reference counts, eviction when a cached block is taken from the head,
blocks freed in reverse order, one token sampled when a request's computed tokens reach its
tokens, a 1 s step. As in vLLM 0.11 (BlockHashToBlockMap) every copy of a block's content
stays cached: two requests that computed the same block each cache their own, a lookup
takes the first one cached that is still there, and evicting one copy leaves the others.
"""

from __future__ import annotations

from collections import deque


class Block:
    def __init__(self, i: int) -> None:
        self.id, self.ref, self.hash = i, 0, None


class Request:
    def __init__(self, rid, prompt, output, group, shared):
        self.id, self.prompt, self.output = rid, prompt, output
        self.group, self.shared = group, shared
        self.generated = self.computed = self.cached = self.preemptions = 0
        self.blocks = []
        self.first = self.finish = None

    @property
    def num_tokens(self):
        return self.prompt + self.generated

    def block_hash(self, j, b):
        """Block j's content: the group's shared prefix, or this request's own tokens."""
        if self.group is not None and (j + 1) * b <= self.shared:
            return ("group", self.group, j)
        return ("own", self.id, j)


class Engine:
    def __init__(self, num_blocks, b, budget, seqs, chunked, caching, threshold):
        self.b, self.budget, self.seqs = b, budget, seqs
        self.chunked, self.caching, self.threshold = chunked, caching, threshold
        blocks = [Block(i) for i in range(num_blocks)]
        self.num_usable = num_blocks - 1
        self.free = deque(blocks[1:])
        self.cached = {}  # hash -> {block id: block}, in the order they were cached
        self.running, self.waiting = [], deque()
        self.steps = []  # (tokens computed, blocks in use)
        self.queries = self.hits = 0  # PrefixCacheStats: every lookup (preempted ones too)

    def _lookup(self, r):
        hits = []
        for j in range((r.num_tokens - 1) // self.b if self.caching else 0):
            copies = self.cached.get(r.block_hash(j, self.b))
            if not copies:
                break
            hits.append(next(iter(copies.values())))  # get_one_block: the first cached
        return hits

    def _allocate(self, r, new, hits):
        total = r.computed + len(hits) * self.b + new
        need = -(-total // self.b) - len(hits) - len(r.blocks)
        if need + sum(blk.ref == 0 for blk in hits) > len(self.free):
            return False
        for blk in hits:
            if blk.ref == 0:
                self.free.remove(blk)
            blk.ref += 1
            r.blocks.append(blk)
        r.cached = max(r.cached, len(hits))
        for _ in range(need):
            blk = self.free.popleft()
            if blk.hash is not None:  # evicted: this copy only
                copies = self.cached[blk.hash]
                del copies[blk.id]
                if not copies:
                    del self.cached[blk.hash]
                blk.hash = None
            blk.ref = 1
            r.blocks.append(blk)
        full = min(total, r.num_tokens) // self.b if self.caching else 0
        for j in range(r.cached, full):
            h = r.block_hash(j, self.b)  # cached even if another copy is (no de-duplication)
            r.blocks[j].hash = h
            self.cached.setdefault(h, {})[r.blocks[j].id] = r.blocks[j]
        r.cached = max(r.cached, full)
        return True

    def _release(self, r):
        for blk in reversed(r.blocks):
            blk.ref -= 1
            if blk.ref == 0:
                self.free.append(blk)
        r.blocks, r.cached = [], 0

    def _cap(self, n):
        return self.threshold if 0 < self.threshold < n else n

    def step(self, clock):
        budget, planned, preempted, i = self.budget, [], False, 0
        while i < len(self.running) and budget > 0:
            r = self.running[i]
            new = min(self._cap(r.num_tokens - r.computed), budget)
            gone = False
            while not gone and not self._allocate(r, new, []):
                victim = self.running.pop()  # the newest
                self._release(victim)
                victim.computed, victim.preemptions = 0, victim.preemptions + 1
                self.waiting.appendleft(victim)
                preempted, gone = True, victim is r
            if gone:
                break
            planned.append((r, new))
            budget -= new
            i += 1
        skipped = []
        while not preempted and self.waiting and budget > 0 and len(self.running) < self.seqs:
            r = self.waiting[0]
            hits = self._lookup(r)
            if self.caching:  # vLLM 0.11.0's get_computed_blocks counts each lookup, preempted too
                self.queries += r.num_tokens
                self.hits += len(hits) * self.b
            new = self._cap(r.num_tokens - len(hits) * self.b)
            if not self.chunked and new > budget:
                skipped.append(self.waiting.popleft())
                continue
            new = min(new, budget)
            if not self._allocate(r, new, hits):
                break
            self.running.append(self.waiting.popleft())
            r.computed = len(hits) * self.b
            planned.append((r, new))
            budget -= new
        self.waiting.extendleft(skipped)  # vLLM 0.11.0: back in front, reversed
        if not planned:
            return False
        self.steps.append((sum(n for _, n in planned), self.num_usable - len(self.free)))
        for r, n in planned:
            r.computed += n
            if r.computed == r.num_tokens:
                r.generated += 1
                r.first = clock + 1.0 if r.generated == 1 else r.first
                if r.generated == r.output:
                    r.finish = clock + 1.0
                    self._release(r)
                    self.running.remove(r)
        return True


class WindowEngine(Engine):
    """Several KV cache groups sharing the pool, full attention or a sliding window, prefix
    caching off. vLLM 0.11's allocate_slots first frees each sliding group's blocks wholly
    before the window of the tokens computed *before* the step (remove_skipped_blocks: from
    block (computed - window + 1) // B - 1 down to the first null block, each replaced by the
    null block), then counts every group's new blocks (null places included in the lengths)
    against the free queue; the blocks it freed stay freed when that fails."""

    def __init__(self, windows, **engine):
        super().__init__(caching=False, **engine)
        self.windows = windows  # per group: 0 = full attention, else the window in tokens
        self.null = Block(0)

    def _allocate(self, r, new, hits):
        if not r.blocks:
            r.blocks = [[] for _ in self.windows]
        for w, blocks in zip(self.windows, r.blocks, strict=True):
            last = (r.computed - w + 1) // self.b if w else 0
            for i in range(last - 1, -1, -1):
                if blocks[i] is self.null:
                    break
                self._free_one(blocks[i])
                blocks[i] = self.null
        want = -(-(r.computed + new) // self.b)
        if sum(want - len(blocks) for blocks in r.blocks) > len(self.free):
            return False
        for blocks in r.blocks:
            while len(blocks) < want:
                blk = self.free.popleft()
                blk.ref = 1
                blocks.append(blk)
        return True

    def _free_one(self, blk):
        blk.ref -= 1
        if blk.ref == 0:
            self.free.append(blk)

    def _release(self, r):
        for blocks in r.blocks:
            for blk in reversed(blocks):
                if blk is not self.null:
                    self._free_one(blk)
        r.blocks, r.cached = [], 0


def replay(arrivals, prompts, outputs, groups, shared, **engine):
    """The steps (1 s each), every request (first token, finish, preemptions) and the
    prefix-cache (queries, hits) of every lookup. ``windows`` (one per KV cache
    group, 0 = full attention) runs WindowEngine, prefix caching off."""
    windows = engine.pop("windows", None)
    if windows is not None:
        engine.pop("caching", None)
    e = Engine(**engine) if windows is None else WindowEngine(windows, **engine)
    rows = zip(prompts, outputs, groups, shared, strict=True)
    reqs = [Request(i, *x) for i, x in enumerate(rows)]
    order = sorted(range(len(reqs)), key=lambda i: (arrivals[i], i))
    clock, k = 0.0, 0
    while True:
        while k < len(order) and arrivals[order[k]] <= clock:
            e.waiting.append(reqs[order[k]])
            k += 1
        if not e.running and not e.waiting:
            if k == len(order):
                return e.steps, reqs, (e.queries, e.hits)
            clock = max(clock, arrivals[order[k]])
        elif e.step(clock):
            clock += 1.0
