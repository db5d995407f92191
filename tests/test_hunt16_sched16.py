"""Hunt 16, the serving simulator's scheduling rules against vLLM 0.11.0's v1 scheduler
(vllm/v1/core/sched/scheduler.py, kv_cache_manager.py, block_pool.py): exact step traces by
hand, 1 s per step, on the compiled core (where built) and the Python loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload
from kvplan.specs.requests.generators import random_workload
from tests.conftest import run_cli
from tests.test_sim_scheduler import run, tokens


@pytest.fixture(params=["core", "python"])
def loop(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    return request.param


@pytest.mark.parametrize(("block", "hit"), [(1, 24), (8, 24), (16, 16), (32, 0)])
def test_random_prefix_len_hits_every_whole_block_of_the_prefix(loop, block, hit):
    # `vllm bench serve --random-prefix-len 24`: every prompt starts with the same 24 tokens,
    # then 10 random ones (34 tokens). One request at a time (max_num_seqs 1): the first
    # computes the prefix, each later one hits every whole block of it that vLLM cached
    # (find_longest_cache_hit, at most (34 - 1) // B blocks): B = 1 and 8: 24 tokens, B = 16:
    # 16 (block 1 holds 8 prefix and 8 random tokens), B = 32: 0. Before: the prefix was
    # hashed in 16-token blocks, so B = 1 and 8 hit 16 tokens (the third 8-token block, or
    # tokens 16-23, never matched).
    w = random_workload(num_prompts=4, input_len=10, output_len=2, prefix_len=24,
                        rng=np.random.default_rng(0))
    assert w.prompt_tokens.tolist() == [34] * 4
    r = simulate(w, timer=LinearTimer(base_s=1.0), num_blocks=1000, block_size=block,
                 limits=Limits(max_num_batched_tokens=100, max_num_seqs=1), validate=True)
    assert r.prefix_hit_tokens.tolist() == [0, hit, hit, hit]
    assert r.prefix_lookup_hits == 3 * hit


def test_max_num_partial_prefills_above_one_is_refused_as_vllm_does_not_start():
    # vLLM 0.11.0 engine/arg_utils.py: _is_v1_supported_oracle returns False for
    # max_num_partial_prefills != 1 ("Concurrent Partial Prefill is not supported by the V1
    # Engine. Falling back to V0."), and build_async_engine_client_from_engine_args then
    # fails its `assert envs.VLLM_USE_V1`: no server. Before: kvplan simulated it with a
    # long-prefill cap of int(0.04 * max_model_len) (163 tokens at 4096).
    r = run_cli("simulate", "llama-3.1-8b", "--num-prompts", "3", "--max-model-len", "4096",
                "--max-num-partial-prefills", "2")
    assert r.code == 2, r.out
    assert r.err.strip().splitlines() == [
        "error: --max-num-partial-prefills 2: vLLM 0.11's V1 engine has no concurrent partial "
        "prefills and does not start with it above 1; drop the flag (a per-request cap is "
        "--long-prefill-token-threshold)"]
    pasted = run_cli("simulate", "--num-prompts", "3", "--", "vllm", "serve",
                     "meta-llama/Llama-3.1-8B", "--max-num-partial-prefills", "4")
    assert pasted.code == 2 and "--max-num-partial-prefills 4" in pasted.err
    assert run_cli("simulate", "llama-3.1-8b", "--num-prompts", "3",
                   "--max-num-partial-prefills", "1").code == 0


def test_no_enable_chunked_prefill_runs_chunked_as_vllm_0_11_does():
    # vLLM 0.11.0 engine/arg_utils.py EngineArgs._set_default_args: "V1 always uses chunked
    # prefills ... for non-pooling tasks": enable_chunked_prefill = True whatever the flag
    # said, then the GPU class's budget (A100: 2048 tokens). One 5000-token prompt, output 1:
    # chunks of 2048, 2048, 904 = 3 steps. Before: a 8192-token budget (max(max_model_len,
    # 2048)) without chunking, 1 step; and a budget below max_model_len was refused.
    args = ("simulate", "llama-3.1-8b", "--gpu", "A100-80GB-SXM", "--max-model-len", "8192",
            "--num-prompts", "1", "--random-input-len", "5000", "--random-output-len", "1",
            "--json")
    off = run_cli(*args, "--no-enable-chunked-prefill")
    assert off.code == 0, off.err
    assert (off.json()["max_num_batched_tokens"], off.json()["num_steps"]) == (2048, 3)
    assert "note: vLLM 0.11 runs chunked prefill whatever --no-enable-chunked-prefill" in off.err
    on = run_cli(*args)
    assert on.json()["num_steps"] == 3 and "chunked prefill" not in on.err
    small = run_cli("simulate", "llama-3.1-8b", "--gpu", "H100", "--num-prompts", "1",
                    "--random-input-len", "5000", "--random-output-len", "1", "--json",
                    "--max-num-batched-tokens", "2048", "--no-enable-chunked-prefill")
    assert small.code == 0, small.err
    assert small.json()["num_steps"] == 3


def test_a_request_hits_blocks_another_computes_in_the_same_step(loop):
    # vLLM 0.11.0 caches a request's blocks when it allocates them (allocate_slots ->
    # cache_blocks(num_computed + num_new)), before the step runs, so a request admitted
    # later in the same step hits them. B = 4, A and B (prompt 10, output 2) share their
    # first 8 tokens, both at t = 0. Step 0: A takes 3 blocks (10 tokens) and caches blocks
    # 0-1; B hits them ((10 - 1) // 4 = 2 blocks), computes 2 tokens in 1 new block: 12
    # tokens, 4 blocks in use. Step 1: two decodes in the blocks held (11 tokens, 3 each).
    w = workload([0, 0], [10, 10], [2, 2], hashes=[[1, 2], [1, 2]], hash_tokens=4)
    r = run(w, blocks=100, b=4)
    assert r.steps.new_tokens.tolist() == [12, 2]
    assert r.steps.used_blocks.tolist() == [4, 4]
    assert r.prefix_hit_tokens.tolist() == [0, 8]
    assert (r.prefix_lookup_hits, r.prefix_query_tokens) == (8, 20)
    assert [tokens(r, i) for i in range(2)] == [[1.0, 2.0], [1.0, 2.0]]


@st.composite
def _timed_cases(draw):
    """Shared prefixes, tight pools, caps, max_num_seqs, closed loops, and step times that
    grow with tokens and context (the fast paths price runs of steps at once)."""
    b, n = draw(st.sampled_from([1, 2, 4, 16])), draw(st.integers(2, 40))
    prompts = draw(st.lists(st.integers(1, 120), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 60), min_size=n, max_size=n))
    lead = draw(st.integers(1, 6)) * b
    hashes = [list(range(min(lead, p) // b)) if draw(st.booleans()) else [] for p in prompts]
    chunked = draw(st.booleans())
    budget = draw(st.integers(n, 200))
    if not chunked:
        budget = max([budget] + [p + o for p, o in zip(prompts, outputs, strict=True)])
    peak = max(-(-(p + o - 1) // b) for p, o in zip(prompts, outputs, strict=True))
    lim = Limits(max_num_batched_tokens=budget, max_num_seqs=draw(st.integers(1, n)),
                 chunked_prefill=chunked, prefix_caching=draw(st.booleans()),
                 long_prefill_token_threshold=draw(st.sampled_from([0, 0, 5, 33]))
                 if chunked else 0)
    arrivals = sorted(draw(st.lists(st.floats(0, 20, allow_nan=False), min_size=n,
                                    max_size=n)))
    w = workload(arrivals, prompts, outputs, hashes=hashes, hash_tokens=b,
                 concurrency=draw(st.sampled_from([None, None, 1, 4])))
    timer = LinearTimer(base_s=draw(st.sampled_from([0.5, 1.0])),
                        per_token_s=draw(st.sampled_from([0.0, 0.01])),
                        per_context_s=draw(st.sampled_from([0.0, 0.0007])))
    return w, lim, timer, b, peak + 1 + draw(st.integers(0, 4 * n))


@settings(max_examples=60, deadline=None)
@given(_timed_cases())
def test_core_python_and_step_by_step_agree_on_timed_workloads(case):
    # The compiled core, the Python fast path (lean steps, decode runs) and the step-by-step
    # reference give the same steps, blocks, token times and prefix-cache counts.
    import os

    w, lim, timer, b, blocks = case
    runs = []
    had = os.environ.get("KVPLAN_SIM_CORE")
    try:
        for env, fast in (("", True), ("python", True), ("python", False)):
            os.environ["KVPLAN_SIM_CORE"] = env
            runs.append(simulate(w, timer=timer, num_blocks=blocks, block_size=b, limits=lim,
                                 fast=fast, validate=True))
    finally:
        if had is None:
            os.environ.pop("KVPLAN_SIM_CORE", None)
        else:
            os.environ["KVPLAN_SIM_CORE"] = had
    ref = runs[-1]
    for r in runs[:-1]:
        assert r.steps.new_tokens.tolist() == ref.steps.new_tokens.tolist()
        assert r.steps.used_blocks.tolist() == ref.steps.used_blocks.tolist()
        assert r.steps.start_s.tolist() == ref.steps.start_s.tolist()
        assert np.array_equal(r.first_token_s, ref.first_token_s, equal_nan=True)
        assert np.array_equal(r.finish_s, ref.finish_s, equal_nan=True)
        assert r.preemptions.tolist() == ref.preemptions.tolist()
        assert r.prefix_hit_tokens.tolist() == ref.prefix_hit_tokens.tolist()
        assert (r.prefix_lookup_hits, r.prefix_query_tokens) == (
            ref.prefix_lookup_hits, ref.prefix_query_tokens)


def test_pasted_max_long_partial_prefills_other_than_one_is_refused():
    # vLLM 0.11.0 _is_v1_supported_oracle: max_long_partial_prefills != 1 stops the server as
    # max_num_partial_prefills does. Before: listed among the ignored flags, simulated.
    r = run_cli("simulate", "--num-prompts", "3", "--", "vllm", "serve",
                "meta-llama/Llama-3.1-8B", "--max-long-partial-prefills", "2")
    assert r.code == 2
    assert r.err.strip().splitlines() == [
        "error: --max-long-partial-prefills 2: vLLM 0.11's V1 engine has no concurrent "
        "partial prefills and does not start with it other than 1; drop the flag"]
    ok = run_cli("simulate", "--num-prompts", "3", "--", "vllm", "serve",
                 "meta-llama/Llama-3.1-8B", "--max-long-partial-prefills", "1")
    assert ok.code == 0, ok.err
