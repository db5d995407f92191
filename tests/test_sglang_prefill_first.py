"""SGLang's prefill-first scheduler, used to replay SGLang's measured runs in calibration
(``Limits.prefill_first``, ``kvplan.analysis.calibration.engines``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.calibration.engines import engine_limits, sglang_chunk_tokens
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def _run(prompts: list[int], outputs: list[int], budget: int, first: bool,
         fast: bool = False, blocks: int = 1000):
    lim = Limits(max_num_batched_tokens=budget, max_num_seqs=64, prefill_first=first)
    w = workload([0.0] * len(prompts), prompts, outputs)
    return simulate(w, timer=LinearTimer(base_s=1.0), num_blocks=blocks, block_size=16,
                    limits=lim, fast=fast)


def test_burst_step_trace_prefill_first_against_vllm() -> None:
    # Three prompts of 6 tokens, 3 outputs each, 8 tokens a step, 1 s a step.
    # SGLang: step 1 prefills r0 (6) + r1 (2); step 2 r1 (4) + r2 (4), no decode of r0;
    # step 3 r2 (2); steps 4 and 5 decode all three. First tokens at 1, 2, 3; all end at 5.
    r = _run([6, 6, 6], [3, 3, 3], budget=8, first=True)
    assert r.first_token_s.tolist() == [1.0, 2.0, 3.0]
    assert r.finish_s.tolist() == [5.0, 5.0, 5.0]
    assert r.steps.new_tokens.tolist() == [8, 8, 2, 3, 3]
    # vLLM mixes: step 2 decodes r0 beside r1 (4) and r2 (3): r0 ends at 3, r1 at 4, r2 at 5.
    v = _run([6, 6, 6], [3, 3, 3], budget=8, first=False)
    assert v.first_token_s.tolist() == [1.0, 2.0, 3.0]
    assert v.finish_s.tolist() == [3.0, 4.0, 5.0]
    assert v.steps.new_tokens.tolist() == [8, 8, 5, 2, 1]


def test_fast_flag_cannot_bypass_the_policy() -> None:
    a = _run([40, 7, 90, 33], [5, 9, 2, 4], budget=32, first=True, fast=True)
    b = _run([40, 7, 90, 33], [5, 9, 2, 4], budget=32, first=True, fast=False)
    assert np.array_equal(a.finish_s, b.finish_s)
    assert np.array_equal(a.steps.new_tokens, b.steps.new_tokens)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 80), st.integers(2, 12)), min_size=1, max_size=12),
       st.integers(8, 128))
def test_burst_prefills_every_prompt_before_any_second_token(
        reqs: list[tuple[int, int]], budget: int) -> None:
    prompts, outputs = [p for p, _ in reqs], [o for _, o in reqs]
    r = _run(prompts, outputs, budget=budget, first=True)
    assert r.finished.all()
    assert int(r.steps.new_tokens.sum()) == sum(prompts) + sum(o - 1 for o in outputs)
    # ample blocks and seats: no decode runs while a prompt is left, so the last first token
    # comes before any request's second token
    second = min(r.token_times(i)[1] for i in range(len(reqs)))
    assert r.first_token_s.max() < second


def test_sglang_limits_from_gpu_memory_and_the_runs_own_settings() -> None:
    vllm = Limits(max_num_batched_tokens=8192, max_num_seqs=1024)
    h200, b200 = load_gpu("H200-SXM-141GB"), load_gpu("B200-SXM-180GB")
    # SGLang server_args: chunked_prefill_size 8192 under 160 GiB, 16384 above
    assert sglang_chunk_tokens(load_gpu("A100-80GB-SXM")) == 8192
    assert sglang_chunk_tokens(h200) == 8192
    assert sglang_chunk_tokens(b200) == 16384
    got = engine_limits("sglang", vllm, h200, EngineConfig())
    assert (got.prefill_first, got.max_num_batched_tokens, got.max_num_seqs) == (True, 8192, 2048)
    own = engine_limits("sglang", vllm, h200,
                        EngineConfig(max_num_batched_tokens=32768, max_num_seqs=512))
    assert (own.max_num_batched_tokens, own.max_num_seqs) == (32768, 512)
    assert engine_limits("vllm", vllm, b200, EngineConfig()) is vllm
