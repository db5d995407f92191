"""Integer sums a step's cost needs that are not plain totals: whether a step holds prefill
work, and attended pairs / context under a sliding window."""

from __future__ import annotations

import numpy as np

from kvplan.costs.step.batch import IntArray
from kvplan.costs.step.records import StepAggregates


def has_prefill(new_tokens: IntArray, context_tokens: IntArray) -> bool:
    """Whether a step holds prefill work: some request computes more than one token (a prompt
    or a chunk of one) or has nothing cached yet (its first forward pass, a 1-token prompt).
    A step of only 1-token decodes over cached context is pure decode."""
    n, c = np.asarray(new_tokens), np.asarray(context_tokens)
    return bool(np.any(n > 1) or np.any(c == 0))


def _clipped_pairs(n: IntArray, c: IntArray, w: int) -> int:
    """Sum over requests of sum_{j=c+1}^{c+n} min(j, w): keys attended under a window of w."""
    lo, hi = c + 1, c + n
    below = np.minimum(hi, w)
    ramp_n = np.maximum(below - lo + 1, 0)
    ramp = ramp_n * (lo + below) // 2  # consecutive integers lo..below
    return int(ramp.sum() + ((n - ramp_n) * w).sum())


def _clipped_sum(c_sorted: IntArray, shift: IntArray, w: int) -> IntArray:
    """For each s in ``shift``: sum_i min(c_i + s, w), with c sorted ascending."""
    prefix = np.concatenate(([0], np.cumsum(c_sorted)))
    inside = np.searchsorted(c_sorted, w - shift, side="left")  # c_i + s < w
    return np.asarray(prefix[inside] + inside * shift + (len(c_sorted) - inside) * w,
                      dtype=np.int64)


def longest_chunk(new: list[int] | IntArray) -> int:
    """The most new tokens of one request computing more than one (0 if none): the sequence
    a Gated DeltaNet layer's chunked scan runs along longest (a list: plain Python; an
    array: one reduction)."""
    if not len(new):
        return 0
    top = max(new) if isinstance(new, list) else int(new.max())
    return top if top > 1 else 0


def step_aggregates(window: int, sliding_flops: float, mla: bool, new: IntArray,
                    ctx: IntArray) -> StepAggregates:
    """One step's sums from its requests' new and cached tokens (``window``: the sliding
    layers' window, counted where they do work; ``mla``: MLA prefill pairs apart)."""
    n = np.asarray(new, dtype=np.int64)
    c = np.asarray(ctx, dtype=np.int64)
    full_pairs = int(np.dot(n, c)) + int(np.dot(n, n + 1)) // 2
    s_ctx = s_pairs = p_pairs = p_ctx = 0
    if window and sliding_flops:
        s_ctx, s_pairs = int(np.minimum(c, window).sum()), _clipped_pairs(n, c, window)
    if mla:
        p_pairs, p_ctx = _prefill_sums(n.tolist(), c.tolist())
    return StepAggregates(int(n.sum()), len(n), int(c.sum()), full_pairs, s_ctx, s_pairs,
                          int(has_prefill(n, c)), p_pairs, p_ctx, longest_chunk(n))


def decode_aggregates(window: int, sliding_flops: float, ctx: IntArray,
                      num_steps: int) -> StepAggregates:
    """The sums of ``num_steps`` pure-decode steps of the requests with cached ``ctx``."""
    c = np.sort(np.asarray(ctx, dtype=np.int64))
    r = len(c)
    k = np.arange(num_steps, dtype=np.int64)
    full_ctx = int(c.sum()) + r * k
    s_ctx = s_pairs = np.zeros(num_steps, dtype=np.int64)
    if window and sliding_flops:
        s_ctx, s_pairs = _clipped_sum(c, k, window), _clipped_sum(c, k + 1, window)
    tokens = np.full(num_steps, r, dtype=np.int64)
    # only step 0 can hold a prefill: a request with nothing cached (a 1-token prompt)
    prefill = np.zeros(num_steps, dtype=np.int64)
    if r and num_steps and c[0] == 0:
        prefill[0] = 1
    return StepAggregates(tokens, tokens, full_ctx, full_ctx + r, s_ctx, s_pairs, prefill)


def _prefill_sums(new: list[int], ctx: list[int]) -> tuple[int, int]:
    """(attended pairs, cached context) summed over the requests computing > 1 token: the
    ones vLLM's MLA backends send down the prefill path (decode threshold: query length 1)."""
    pairs = context = 0
    for n, c in zip(new, ctx, strict=True):
        if n > 1:
            pairs += n * c + n * (n + 1) // 2
            context += c
    return pairs, context
