"""A DP rank's step in lockstep: its own batch, its token count padded to the widest rank's.

vLLM 0.11 (``v1/worker/gpu_model_runner.py`` get_dp_padding) pads every DP rank's forward
to the largest token count across the DP group (unless --enforce-eager), so the MoE
collectives meet equal shapes; a rank with no request runs ``execute_dummy_batch`` (one
dummy token, padded the same way). So a rank's step is priced at::

    tokens   = T_pad = max over ranks of the rank's scheduled tokens (>= 1)
    requests, context, attended pairs, prefill = the rank's own batch
               (a dummy step: 1 request, no context, 1 pair, decode)

The GEMMs, the experts (at dp x T_pad: ``kvplan.costs.step.parallel.ep_step``) and the exchange
scale with T_pad; attention and the per-request terms with the rank's own requests.
"""

from __future__ import annotations

from dataclasses import replace
from operator import mul
from typing import Any

import numpy as np

from kvplan.costs.step.batch import IntArray
from kvplan.costs.step.records import StepAggregates


def padded_step_s(timer: Any, new_tokens: IntArray, context_tokens: IntArray,
                  padded_tokens: int) -> float:
    """Seconds of one rank's step of ``new_tokens`` over ``context_tokens``, run at
    ``padded_tokens`` tokens (an empty batch: the dummy step). Timers without sums
    (``step_time_agg`` or ``aggregates``) price the batch unpadded."""
    n, c = new_tokens, context_tokens
    if len(n) == 0:
        return dummy_step_s(timer, padded_tokens)
    if getattr(timer, "supports_aggregates", False):
        nl, cl = n.tolist(), c.tolist()  # plain Python: faster than numpy on a rank's batch
        pairs = sum(map(mul, nl, cl)) + sum(x * (x + 1) for x in nl) // 2
        top = max(nl)
        prefill = top > 1 or min(cl) == 0  # has_prefill
        if getattr(timer, "needs_longest", False):  # GDN: its longest prompt chunk too
            return float(timer.step_time_agg(padded_tokens, len(nl), sum(cl), pairs, prefill,
                                             longest=top if top > 1 else 0))
        return float(timer.step_time_agg(padded_tokens, len(nl), sum(cl), pairs, prefill))
    if hasattr(timer, "aggregates"):
        a = replace(timer.aggregates(n, c), tokens=padded_tokens)
        return float(timer.times_s(a)[()])
    return float(timer.step_time_s(n, c))


def dummy_step_s(timer: Any, padded_tokens: int) -> float:
    """An idle rank's dummy step (one dummy decode request, padded to ``padded_tokens``)."""
    if getattr(timer, "supports_aggregates", False):
        return float(timer.step_time_agg(padded_tokens, 1, 0, 1, False))
    if hasattr(timer, "times_s"):
        a = StepAggregates(tokens=padded_tokens, requests=1, full_context=0, full_pairs=1,
                           sliding_context=0, sliding_pairs=0, prefill=0)
        return float(timer.times_s(a)[()])
    one = np.ones(1, dtype=np.int64)
    return float(timer.step_time_s(one, one))
