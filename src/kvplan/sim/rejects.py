"""Requests that can never be served, with the reason vLLM (or physics) gives."""

from __future__ import annotations

import numpy as np

from kvplan.sim.blocks import KvShape
from kvplan.sim.scheduler import Limits
from kvplan.sim.state import IntArray, SimState


def reject_reasons(s: SimState, shape: KvShape, limits: Limits, usable: int,
                    max_model_len: int | None) -> dict[int, str]:
    """Requests that can never be served, with the reason vLLM (or physics) gives."""
    total = s.prompt + s.output
    reasons: dict[int, str] = {}
    bad = np.flatnonzero((s.prompt < 1) | (s.output < 1))
    for i in bad.tolist():
        reasons[i] = "prompt and output must each have at least 1 token"
    if max_model_len is not None:
        for i in np.flatnonzero(total > max_model_len).tolist():
            reasons.setdefault(i, f"prompt + output = {int(total[i])} tokens exceeds "
                                  f"max_model_len {max_model_len}")
    peak = solo_peak_blocks(s.prompt, total, shape, limits)
    for i in np.flatnonzero(peak > usable).tolist():
        reasons.setdefault(i, f"needs {int(peak[i])} KV blocks alone; the pool has {usable} "
                              f"usable (vLLM keeps one more as its null block)")
    if not limits.chunked_prefill:
        cap = limits.max_num_batched_tokens
        for i in np.flatnonzero(total - 1 > cap).tolist():
            reasons.setdefault(i, f"{int(total[i]) - 1} tokens to (re)compute exceed "
                                  f"max_num_batched_tokens {cap} without chunked prefill")
    return reasons


def solo_peak_blocks(prompt: IntArray, total: IntArray, shape: KvShape,
                      limits: Limits) -> IntArray:
    """Most pool blocks each request may hold when it runs alone.

    Full attention and state groups only grow: the last step (prompt + output - 1 tokens)
    is the peak. A sliding window holds a whole prefill chunk (vLLM frees on the tokens
    computed before the step), so its peak may be a chunk: chunks of max_num_batched_tokens
    (or one chunk without chunked prefill) over up to prompt + output - 1 tokens, which
    covers the prompt and any recompute after a preemption. In decode a sliding group is
    periodic in the block size, so the last B decode steps cover the rest.
    """
    last = np.maximum(total - 1, 1)
    peak = shape.blocks(last)
    if all(g.kind != "sliding" for g in shape.groups) or len(prompt) == 0:
        return peak
    first = np.minimum(prompt + 1, last)
    for j in range(1, shape.block_size):  # the last B decode states, kept >= prompt + 1
        peak = np.maximum(peak, shape.blocks(np.maximum(last - j, first)))
    chunk = limits.max_num_batched_tokens if limits.chunked_prefill else int(last.max())
    chunk = limits.cap(chunk)  # a long-prefill cap makes every chunk at most the threshold
    c = np.zeros_like(last)
    while (live := c < last).any():
        t = np.minimum(c + chunk, last)
        peak = np.where(live, np.maximum(peak, shape.blocks(t, c)), peak)
        c = c + chunk
    return peak
