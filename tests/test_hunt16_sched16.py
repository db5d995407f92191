"""Hunt 16, the serving simulator's scheduling rules against vLLM 0.11.0's v1 scheduler
(vllm/v1/core/sched/scheduler.py, kv_cache_manager.py, block_pool.py): exact step traces by
hand, 1 s per step, on the compiled core (where built) and the Python loop."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer
from kvplan.specs.requests.generators import random_workload


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
