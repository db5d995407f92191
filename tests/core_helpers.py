"""Run the simulator on one core or the other, and compare two results field by field."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from kvplan.costs.step.batch import AggregateForm
from kvplan.sim import core


@contextmanager
def python_loop() -> Iterator[None]:
    """KVPLAN_SIM_CORE=python for the block: the pure-Python reference loop."""
    old = os.environ.get(core.ENV)
    os.environ[core.ENV] = "python"
    try:
        yield
    finally:
        if old is None:
            del os.environ[core.ENV]
        else:
            os.environ[core.ENV] = old


def segments(r) -> list[tuple[int, int, int]]:
    return sorted(zip(r.seg_req.tolist(), r.seg_first.tolist(), r.seg_last.tolist(),
                      strict=True))


def assert_same(a, b) -> None:
    """Every request's timestamps and counts, the step series, emission runs, totals."""
    for name in ("arrival_s", "sent_s", "scheduled_s", "first_token_s", "finish_s",
                 "prompt_tokens", "output_tokens", "preemptions", "prefix_hit_tokens",
                 "finished", "preemption_s"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    for name in ("start_s", "end_s", "used_blocks", "logical_bytes", "running", "waiting",
                 "new_tokens"):
        x, y = getattr(a.steps, name), getattr(b.steps, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.rejected == b.rejected
    assert (a.failed_s is None) == (b.failed_s is None)
    if a.failed_s is not None:
        assert np.array_equal(a.failed_s, b.failed_s, equal_nan=True), "failed_s"
    assert segments(a) == segments(b)
    assert (a.num_blocks, a.block_size, a.prefill_claimed_blocks, a.decode_claimed_blocks,
            a.prefix_query_tokens, a.prefix_lookup_hits, a.admission_peak_blocks) == (
        b.num_blocks, b.block_size, b.prefill_claimed_blocks, b.decode_claimed_blocks,
        b.prefix_query_tokens, b.prefix_lookup_hits, b.admission_peak_blocks)


@dataclass(frozen=True, slots=True)
class FormTimer:
    """A timer whose step_time_s is AggregateForm's documented formula transcribed in plain
    Python, its sums counted the long way (sum of min(j, W) over every attended position):
    the reference the core's C evaluation of a form is tested against."""

    form: AggregateForm

    def step_time_s(self, new_tokens: np.ndarray, context_tokens: np.ndarray) -> float:
        f = self.form
        n, c = new_tokens.tolist(), context_tokens.tolist()
        t, r, w = sum(n), float(len(n)), f.window
        pairs = sum(a * b + a * (a + 1) // 2 for a, b in zip(n, c, strict=True))
        pre = any(a > 1 or b == 0 for a, b in zip(n, c, strict=True))
        dense = max(f.gemm[t] + f.lm_per_request * r, f.weights[t])
        mix_c = f.attn_per_pair * float(pairs) + f.state[t]
        if f.mla:
            pp = sum(a * b + a * (a + 1) // 2 for a, b in zip(n, c, strict=True) if a > 1)
            pc = sum(b for a, b in zip(n, c, strict=True) if a > 1)
            mix_c = mix_c + (f.mla_prefill_per_pair * float(pp)
                             + f.mla_context_per_token * float(pc))
        mix_m = f.kv_per_context * float(sum(c)) + (f.kv_write[t] + f.state_per_request * r)
        if w:
            sp = sum(min(j, w) for a, b in zip(n, c, strict=True) for j in range(b + 1, b + a + 1))
            mix_c = mix_c + f.sliding_attn_per_pair * float(sp)
            mix_m = mix_m + f.sliding_kv_per_context * float(sum(min(b, w) for b in c))
        stage = dense + max(mix_c, mix_m)
        if f.allreduce is not None:
            stage = stage + f.allreduce[t]
        stage = stage + f.layer_s
        if f.p2p is not None:
            stage = stage + f.pp_minus_1 * (stage + f.p2p[t])
        return float(stage + (f.overhead_s[int(pre)] + f.request_s * r))

    def decode_run_s(self, context_tokens: np.ndarray, num_steps: int) -> np.ndarray:
        ones = np.ones(len(context_tokens), dtype=np.int64)
        return np.array([self.step_time_s(ones, context_tokens + k) for k in range(num_steps)])

    def aggregate_form(self, max_tokens: int) -> AggregateForm | None:
        return self.form if self.form.max_tokens >= max_tokens else None
