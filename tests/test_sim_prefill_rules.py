"""vLLM v1's prefill rules as exact step traces (1 s per step): the budget shared with running
decodes, when a waiting request's first chunk runs, partial prefills going first, and the
long-prefill cap (long_prefill_token_threshold). vllm/v1/core/sched/scheduler.py,
vllm/config/scheduler.py."""

from __future__ import annotations

import pytest

from kvplan.analysis.serving import long_prefill_threshold
from kvplan.errors import InputError
from kvplan.sim.testing import workload
from kvplan.specs.serving import EngineConfig
from tests.test_sim_scheduler import run, tokens


def test_first_chunk_of_a_request_arriving_mid_step_runs_next_step_beside_decodes():
    # A (4 + 5) runs step 0 alone. B (20 + 2) arrives at 0.5, inside step 0, so it joins
    # WAITING at 1.0; each later step gives A's decode 1 token of the budget of 8 and B the
    # other 7: 7, 7, then the last 6, sampling B's first token at 4.0 (TTFT 3.5 s).
    r = run(workload([0, 0.5], [4, 20], [5, 2]), budget=8)
    assert r.steps.new_tokens.tolist() == [4, 8, 8, 7, 2]
    assert tokens(r, 0) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert tokens(r, 1) == [4.0, 5.0]
    assert r.scheduled_s[1] == 1.0 and r.first_token_s[1] - r.sent_s[1] == 3.5


def test_a_partial_prefill_keeps_going_before_newer_waiting_requests():
    # A (20) takes the whole budget twice; B (4) waits until A's last chunk leaves room.
    r = run(workload([0, 0], [20, 4], [2, 2]), budget=8)
    assert r.steps.new_tokens.tolist() == [8, 8, 8, 2]
    assert r.scheduled_s.tolist() == [0.0, 2.0]
    assert tokens(r, 0) == [3.0, 4.0] and tokens(r, 1) == [3.0, 4.0]


def test_long_prefill_threshold_caps_running_and_waiting_requests():
    # Without a cap both 10-token prompts fit one step of 100; capped at 4 tokens per request
    # per step they take 4, 4, 2 each, side by side, and sample at 3.0.
    plain = run(workload([0, 0], [10, 10], [2, 2]), budget=100)
    assert plain.steps.new_tokens.tolist() == [20, 2]
    capped = run(workload([0, 0], [10, 10], [2, 2]), budget=100, threshold=4)
    assert capped.steps.new_tokens.tolist() == [8, 8, 4, 2]
    assert tokens(capped, 0) == [3.0, 4.0] and tokens(capped, 1) == [3.0, 4.0]
    assert capped.steps.used_blocks.tolist() == [2, 4, 6, 6]


def test_long_prefill_threshold_leaves_decodes_alone_and_shares_the_budget():
    # A (2 + 6) decodes 1 token a step while B (9 + 2, at 0.5) goes in chunks of 4, 4, 1.
    r = run(workload([0, 0.5], [2, 9], [6, 2]), budget=100, threshold=4)
    assert r.steps.new_tokens.tolist() == [2, 5, 5, 2, 2, 1]
    assert tokens(r, 0) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert tokens(r, 1) == [4.0, 5.0]


def test_threshold_from_vllm_scheduler_config():
    assert long_prefill_threshold(EngineConfig(), 4096) == 0  # vLLM's default: no cap
    assert long_prefill_threshold(EngineConfig(long_prefill_token_threshold=7), 4096) == 7
    # vLLM 0.11 does not start with max_num_partial_prefills > 1 (tests/test_hunt16_sched16.py)
    with pytest.raises(InputError, match="--max-num-partial-prefills 2"):
        EngineConfig(max_num_partial_prefills=2, enable_chunked_prefill=False)
    with pytest.raises(InputError, match="--long-prefill-token-threshold"):
        EngineConfig(long_prefill_token_threshold=-1)
