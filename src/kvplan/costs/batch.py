"""The shape of one engine step, and the step-timer contract the simulator relies on."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class StepTimer(Protocol):
    """Anything that prices one engine iteration in seconds.

    ``new_tokens[i]`` is how many tokens request i computes this step (a prefill chunk, or 1
    for a decode); ``context_tokens[i]`` is how many tokens it already had in the cache before
    the step. Both arrays have one entry per scheduled request.
    """

    def step_time_s(self, new_tokens: IntArray, context_tokens: IntArray) -> float:
        """Seconds for one step with this batch."""
        ...

    def decode_run_s(self, context_tokens: IntArray, num_steps: int) -> FloatArray:
        """Seconds of each of ``num_steps`` consecutive pure-decode steps of the same requests.

        Step k (0-based) has every request decode one token with context_tokens + k cached.
        Must equal calling step_time_s step by step (tests prove it).
        """
        ...


class AggregateTimer(StepTimer, Protocol):
    """A StepTimer that can also price a step from the batch's sums (the simulator's lean
    path uses it when ``supports_aggregates`` is true; it must equal step_time_s exactly)::

        tokens = sum(new)   requests = len(new)   context = sum(ctx)
        pairs  = sum(new * ctx + new * (new + 1) / 2)   prefill = any(new > 1 or ctx == 0)

    decode_run_agg(requests, context, k) equals decode_run_s(ctx, k) when sum(ctx) = context
    and every ctx >= 1.
    """

    @property
    def supports_aggregates(self) -> bool: ...

    def step_time_agg(self, tokens: int, requests: int, context: int, pairs: int,
                      prefill: bool) -> float: ...

    def decode_run_agg(self, requests: int, context: int, num_steps: int) -> FloatArray: ...
