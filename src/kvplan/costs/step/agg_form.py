"""The step model's ``step_time_agg`` as an ``AggregateForm`` (tables over a step's tokens
and scalars) for the simulator's compiled core. Keep it in step with ``StepCostModel._stage``
and ``_finish``: the same float operations on the same values, so the core's step times equal
the timer's to the last bit (tests/test_sim_core.py; kvplan.sim.core spot checks it too).
The token tables are the model's own (roofline or measured kernels alike)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvplan.costs.step.batch import AggregateForm
from kvplan.costs.step.coefficients import at


def roofline_form(model: Any, co: Any, max_tokens: int) -> AggregateForm:
    """``model``: a StepCostModel; ``co``: its _Coefficients (window and MLA terms included:
    the form then equals step_time_s, which needs the per-request sums SC, SP, PP, PC)."""
    if max_tokens >= len(co.gemm_t):
        co = model._grow(max_tokens)
    n = max_tokens + 1
    t = np.arange(n, dtype=np.float64)
    i = np.arange(n, dtype=np.int64)  # past the tables' cap: ``at``'s line, as _stage reads
    return AggregateForm(
        max_tokens=max_tokens, gemm=at(co.gemm_t, i).copy(), weights=at(co.weights_t, i).copy(),
        state=co.state_flops_s * t, kv_write=co.kv_write_s * t,
        allreduce=at(co.allreduce_t, i).copy() if co.allreduce_t is not None else None,
        p2p=co.p2p_s * t + co.allreduce_latency_s if co.pp > 1 else None,
        lm_per_request=co.lm_s, attn_per_pair=co.attn_s, kv_per_context=co.kv_read_s,
        state_per_request=co.state_bytes_s, layer_s=co.layer_s,
        pp_minus_1=float(co.pp - 1), request_s=co.request_s, overhead_s=co.overhead_s,
        window=co.window, sliding_attn_per_pair=co.sliding_attn_s,
        sliding_kv_per_context=co.sliding_kv_read_s, mla=co.mla,
        mla_prefill_per_pair=co.mla_prefill_s, mla_context_per_token=co.mla_context_s,
        overlap_host=bool(model._async),
        gdn_longest=at(co.gdn_seq_t, i).copy() if co.gdn_seq_t is not None else None)
