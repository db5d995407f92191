"""Per-request simulator state as parallel numpy arrays, plus the prefix-content keys.

Token bookkeeping of one request (vLLM's rule, one token sampled per completed catch-up)::

    num_tokens = prompt + generated        tokens the request has (sampled ones included)
    computed   <= num_tokens               tokens whose KV is in the cache
    a step schedules new <= num_tokens - computed tokens; when computed + new == num_tokens
    a token is sampled (generated += 1). Finished when generated == output_tokens, so the
    last sampled token is never computed: the cache ends at prompt + output - 1 tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

PENDING, WAITING, RUNNING, FINISHED, REJECTED = 0, 1, 2, 3, 4


class WorkloadLike(Protocol):
    """The fields of ``kvplan.specs.requests.workload.Workload`` the simulator reads."""

    @property
    def arrival_s(self) -> FloatArray: ...
    @property
    def prompt_tokens(self) -> IntArray: ...
    @property
    def output_tokens(self) -> IntArray: ...
    @property
    def prefix_hashes(self) -> tuple[npt.NDArray[np.int64], ...] | None: ...
    @property
    def hash_block_tokens(self) -> int: ...
    @property
    def closed_loop_concurrency(self) -> int | None: ...


@dataclass(slots=True)
class SimState:
    """Everything that changes during a simulation (the only mutable state in kvplan)."""

    arrival: FloatArray
    prompt: IntArray
    output: IntArray
    computed: IntArray
    generated: IntArray
    held: IntArray
    status: npt.NDArray[np.int8]
    sent_s: FloatArray
    scheduled_s: FloatArray
    first_token_s: FloatArray
    finish_s: FloatArray
    preemptions: IntArray
    hit_tokens: IntArray
    last_emit: IntArray
    seg_start: IntArray
    shared_keys: list[list[int]] | None
    held_keys: dict[int, list[int]] = field(default_factory=dict)
    """Request -> the cached copies (BlockPool.copies) of shared content it holds."""
    reject_reason: dict[int, str] = field(default_factory=dict)
    running: list[int] = field(default_factory=list)
    waiting: deque[int] = field(default_factory=deque)
    clock: float = 0.0
    step: int = 0
    seg_req: list[int] = field(default_factory=list)
    seg_first: list[int] = field(default_factory=list)
    seg_last: list[int] = field(default_factory=list)
    preempt_steps: list[int] = field(default_factory=list)

    @property
    def num_tokens(self) -> IntArray:
        return self.prompt + self.generated

    def n_shared(self, rid: int) -> int:
        return 0 if self.shared_keys is None else len(self.shared_keys[rid])

    def close_segment(self, rid: int) -> None:
        """End rid's current run of consecutive token emissions (ITL bookkeeping)."""
        if self.last_emit[rid] >= 0:
            self.seg_req.append(rid)
            self.seg_first.append(int(self.seg_start[rid]))
            self.seg_last.append(int(self.last_emit[rid]))
            self.last_emit[rid] = -2

    def emit(self, rid: int, step: int) -> None:
        """rid samples a token at the end of ``step``."""
        if self.last_emit[rid] != step - 1:
            self.close_segment(rid)
            self.seg_start[rid] = step
        self.last_emit[rid] = step


def new_state(work: WorkloadLike, block_size: int, shared_prefix_tokens: int) -> SimState:
    """Fresh state for a workload: every request PENDING, nothing computed."""
    n = len(work.arrival_s)

    def zeros() -> IntArray:
        return np.zeros(n, dtype=np.int64)

    def nans() -> FloatArray:
        return np.full(n, np.nan)

    return SimState(
        arrival=np.asarray(work.arrival_s, dtype=np.float64),
        prompt=np.asarray(work.prompt_tokens, dtype=np.int64),
        output=np.asarray(work.output_tokens, dtype=np.int64),
        computed=zeros(), generated=zeros(), held=zeros(),
        status=np.zeros(n, dtype=np.int8),
        sent_s=nans(), scheduled_s=nans(), first_token_s=nans(), finish_s=nans(),
        preemptions=zeros(), hit_tokens=zeros(),
        last_emit=np.full(n, -2, dtype=np.int64), seg_start=zeros(),
        shared_keys=content_keys(work, block_size, shared_prefix_tokens),
    )


def content_keys(
    work: WorkloadLike, block_size: int, shared_prefix_tokens: int
) -> list[list[int]] | None:
    """Per request, the content keys of its leading prompt blocks that others may share."""
    if work.prefix_hashes is not None:
        return trace_keys(work.prefix_hashes, work.prompt_tokens, work.hash_block_tokens,
                          block_size)
    if shared_prefix_tokens >= block_size:
        full = shared_prefix_tokens // block_size
        prompts = np.asarray(work.prompt_tokens)
        return [list(range(-1, -1 - min(full, int(p) // block_size), -1)) for p in prompts]
    return None


def trace_keys(
    hashes: Sequence[npt.NDArray[np.int64]], prompts: IntArray, hash_tokens: int, block: int
) -> list[list[int]]:
    """Map trace hash blocks (H tokens each) onto B-token blocks.

    Block j holds tokens [jB, (j+1)B). Its content is the whole prefix up to (j+1)B (vLLM
    chains block hashes), i.e. trace hash blocks 0..i with i = ((j+1)B - 1) // H, cut at
    offset (j+1)B - iH. Hash chains are interned to small ids, so
    key(j) = chain_id(h_0..h_i) * (H + 1) + offset. Every whole B-block of the prompt the
    listed hash blocks cover is shareable, also inside a trailing hash block the prompt ends
    in (Mooncake's last, partial one): an id names its block's leading tokens (AIPerf's replay
    builds each id's tokens once and truncates the last block), so an equal chain shares
    them; tokens past the listed blocks are the request's own.
    """
    chains: dict[tuple[int, int], int] = {}
    memo: dict[tuple[int, int], list[int]] = {}  # workloads share one prefix array by reference
    out: list[list[int]] = []
    for h, p in zip(hashes, np.asarray(prompts).tolist(), strict=True):
        nb = min(len(h) * hash_tokens, p) // block
        key = (id(h), nb)
        if key not in memo:
            memo[key] = _block_keys(h, nb, chains, hash_tokens, block)
        out.append(memo[key])
    return out


def _block_keys(h: npt.NDArray[np.int64], nb: int, chains: dict[tuple[int, int], int],
                hash_tokens: int, block: int) -> list[int]:
    if nb == 0:
        return []
    ids = []
    prev = -1
    for x in np.asarray(h).tolist():
        prev = chains.setdefault((prev, int(x)), len(chains))
        ids.append(prev)
    end = (np.arange(nb, dtype=np.int64) + 1) * block
    i = (end - 1) // hash_tokens
    chain = np.asarray(ids, dtype=np.int64)[i]
    keys: list[int] = (chain * (hash_tokens + 1) + end - i * hash_tokens).tolist()
    return keys
