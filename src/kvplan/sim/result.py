"""SimulationResult: per-request timestamps, per-step KV usage series, token emission runs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class KvSeries:
    """One sample per engine step, taken after the step's blocks were allocated."""

    start_s: FloatArray
    end_s: FloatArray
    used_blocks: IntArray
    logical_bytes: IntArray
    """KV bytes the running requests' cached tokens occupy after the step (no page rounding)."""
    running: IntArray
    waiting: IntArray
    new_tokens: IntArray


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationResult:
    """What happened to every request and to the KV pool; arrays are indexed by request."""

    arrival_s: FloatArray
    sent_s: FloatArray
    """When the client sent the request (= arrival, or later under closed-loop concurrency)."""
    scheduled_s: FloatArray
    first_token_s: FloatArray
    finish_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    preemptions: IntArray
    prefix_hit_tokens: IntArray
    finished: BoolArray
    rejected: dict[int, str]
    """Request index -> why it could never be served (e.g. longer than max_model_len)."""
    steps: KvSeries
    seg_req: IntArray
    seg_first: IntArray
    seg_last: IntArray
    """Token emission runs: request seg_req sampled one token at the end of every step in
    [seg_first, seg_last]; a new run starts after a preemption or a skipped step."""
    preemption_s: FloatArray
    """When each preemption happened (start of the step that preempted)."""
    num_blocks: int
    """vLLM's num_gpu_blocks, the null block included (a DP fleet: the ranks' sum)."""
    block_size: int
    prefill_claimed_blocks: int
    decode_claimed_blocks: int
    prefix_query_tokens: int
    """Tokens of every prefix-cache lookup (vLLM 0.11's ``PrefixCacheStats.queries``: a
    request looked up again after it got no blocks counts again, a preempted one too);
    ``prefix_lookup_hits`` the cached tokens those lookups found (``hits``)."""
    prefix_lookup_hits: int
    admission_peak_blocks: int = 0
    """A disaggregated decode instance: the most blocks in use right after it admitted a
    transfer (the whole prompt's blocks, held while the KV crosses the link), which a step
    sample misses when no step runs before a sliding window frees some of them."""
    null_blocks: int = 1
    """vLLM's null blocks in ``num_blocks``: one per pool (a DP fleet: one per rank)."""
    failed_s: FloatArray | None = None
    """When each rejected request's failure reached the client (NaN for the others; None:
    at its send, a run without an API path). One server refuses it once its API server
    admitted it, when it would have reached the engine (sim.frontend.refusal_times: when a
    closed loop frees its slot); a disaggregated fleet's decode side only after the prefill."""

    @property
    def num_requests(self) -> int:
        return len(self.arrival_s)

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: ``num_blocks`` less vLLM's null block (block_pool.py),
        one per engine."""
        return self.num_blocks - self.null_blocks

    @property
    def num_steps(self) -> int:
        return len(self.steps.end_s)

    @property
    def peak_kv_blocks(self) -> int:
        sampled = int(self.steps.used_blocks.max()) if self.num_steps else 0
        return max(sampled, self.admission_peak_blocks)

    @property
    def total_preemptions(self) -> int:
        return int(self.preemptions.sum())

    def token_times(self, i: int) -> FloatArray:
        """Times at which request i received each of its output tokens."""
        mask = self.seg_req == i
        ends = self.steps.end_s
        parts = [ends[a:b + 1] for a, b in zip(self.seg_first[mask], self.seg_last[mask],
                                                strict=True)]
        return np.concatenate(parts) if parts else np.zeros(0)

    def emission_runs(self) -> tuple[IntArray, IntArray, IntArray]:
        """The token emission runs (request, first step, last step), by request then step:
        request i's token times are ``steps.end_s`` over its runs' steps, in this order."""
        order = np.lexsort((self.seg_first, self.seg_req))
        return self.seg_req[order], self.seg_first[order], self.seg_last[order]

    def itl_s(self) -> FloatArray:
        """Every gap between consecutive tokens of the same request, all requests together."""
        req, first, last = self.emission_runs()
        ends = self.steps.end_s
        gaps = np.diff(ends)
        lens = last - first
        inner = concat_ranges(first, lens)
        within = gaps[inner]
        same = req[1:] == req[:-1]
        between = ends[first[1:][same]] - ends[last[:-1][same]]
        return np.concatenate([within, between])


def concat_ranges(starts: IntArray, lens: IntArray) -> IntArray:
    """Concatenation of arange(s, s + n) for every (s, n) pair, without a Python loop."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    keep = lens > 0
    starts, lens = starts[keep], lens[keep]
    offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    out: IntArray = np.arange(total, dtype=np.int64) + offsets
    return out
