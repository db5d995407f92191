"""Integer sums a step's cost needs that are not plain totals: whether a step holds prefill
work, and attended pairs / context under a sliding window."""

from __future__ import annotations

import numpy as np

from kvplan.costs.step.batch import IntArray


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
