"""Run the simulator on one core or the other, and compare two results field by field."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

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
    assert segments(a) == segments(b)
    assert (a.num_blocks, a.block_size, a.prefill_claimed_blocks, a.decode_claimed_blocks,
            a.prefix_query_tokens) == (b.num_blocks, b.block_size, b.prefill_claimed_blocks,
                                       b.decode_claimed_blocks, b.prefix_query_tokens)
