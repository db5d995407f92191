"""Hypothesis invariants over random workloads and configs; fast path == step-by-step path."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import ArrayWorkload, LinearTimer

TIMER = LinearTimer(base_s=0.01, per_token_s=1e-4, per_context_s=1e-6)


@st.composite
def cases(draw):
    n = draw(st.integers(1, 25))
    gaps = draw(st.lists(st.floats(0, 0.2), min_size=n, max_size=n))
    prompts = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 30), min_size=n, max_size=n))
    hashes = None
    if draw(st.booleans()):
        hashes = tuple(np.array(draw(st.lists(st.integers(0, 3), min_size=1, max_size=4)))
                       for _ in range(n))
    w = ArrayWorkload(
        arrival_s=np.cumsum(gaps), prompt_tokens=np.array(prompts, dtype=np.int64),
        output_tokens=np.array(outputs, dtype=np.int64), prefix_hashes=hashes,
        hash_block_tokens=8, closed_loop_concurrency=draw(st.none() | st.integers(1, 4)),
    )
    lim = Limits(max_num_batched_tokens=draw(st.integers(4, 96)),
                 max_num_seqs=draw(st.integers(1, 8)), chunked_prefill=draw(st.booleans()),
                 prefix_caching=draw(st.booleans()),
                 long_prefill_token_threshold=draw(st.sampled_from([0, 0, 0, 3, 17])))
    cfg = dict(num_blocks=draw(st.integers(4, 120)), block_size=draw(st.sampled_from([1, 2, 4, 8])),
               limits=lim, shared_prefix_tokens=draw(st.sampled_from([0, 8, 20])),
               max_model_len=draw(st.none() | st.integers(40, 200)))
    if draw(st.booleans()):  # hybrid: sliding window (+ full attention), no prefix caching
        window = draw(st.sampled_from([3, 8, 17]))
        groups = (CacheGroup(kind="sliding", window=window, bytes_per_token=2),)
        if draw(st.booleans()):
            groups = (CacheGroup(kind="full", bytes_per_token=3), *groups)
        cfg["kv"] = KvShape(block_size=cfg["block_size"], groups=groups)
    return w, cfg


def _run(w, cfg, fast):
    return simulate(w, timer=TIMER, fast=fast, validate=True, **cfg)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_fast_path_equals_step_by_step(case):
    w, cfg = case
    slow, fast = _run(w, cfg, False), _run(w, cfg, True)
    for name in ("sent_s", "scheduled_s", "first_token_s", "finish_s", "preemptions",
                 "prefix_hit_tokens"):
        assert np.array_equal(getattr(slow, name), getattr(fast, name), equal_nan=True), name
    for name in ("start_s", "end_s", "used_blocks", "logical_bytes", "running", "waiting",
                 "new_tokens"):
        assert np.array_equal(getattr(slow.steps, name), getattr(fast.steps, name)), name
    assert slow.rejected == fast.rejected
    assert (slow.prefill_claimed_blocks, slow.decode_claimed_blocks) == (
        fast.prefill_claimed_blocks, fast.decode_claimed_blocks)
    assert np.array_equal(np.sort(slow.itl_s()), np.sort(fast.itl_s()))
    for i in range(len(w)):
        assert np.array_equal(slow.token_times(i), fast.token_times(i))


@settings(max_examples=300, deadline=None)
@given(cases())
def test_invariants(case):
    w, cfg = case
    r = _run(w, cfg, True)  # validate=True checks block conservation after every turn
    lim = cfg["limits"]
    st_ = r.steps
    assert np.all(st_.used_blocks <= cfg["num_blocks"]) and np.all(st_.used_blocks >= 0)
    assert np.all(st_.new_tokens <= lim.max_num_batched_tokens)
    assert np.all(st_.running <= lim.max_num_seqs)
    assert np.all(st_.end_s > st_.start_s)
    assert np.all(st_.start_s[1:] >= st_.end_s[:-1])  # the clock never goes back
    # every request finishes or is rejected with a reason
    assert set(np.flatnonzero(~r.finished).tolist()) == set(r.rejected)
    assert all(r.rejected.values())
    done = np.flatnonzero(r.finished)
    for i in done.tolist():
        times = r.token_times(i)
        assert len(times) == w.output_tokens[i]  # one token per output token
        assert np.all(np.diff(times) > 0)
        assert times[0] == r.first_token_s[i] and times[-1] == r.finish_s[i]
        assert r.sent_s[i] <= r.scheduled_s[i] < r.first_token_s[i] <= r.finish_s[i]
    # computed tokens add up: prompts + generated - 1 per request, plus recompute and hits
    # (prefix_hit_tokens is a request's first admission's hits, vLLM's num_cached_tokens: a
    # readmission after a preemption may hit blocks others cached since, uncounted there)
    lower = int((w.prompt_tokens[done] + w.output_tokens[done] - 1).sum())
    if not cfg["limits"].prefix_caching:
        assert int(st_.new_tokens.sum()) >= lower
    if r.total_preemptions == 0:
        assert int(st_.new_tokens.sum()) + int(r.prefix_hit_tokens[done].sum()) == lower
