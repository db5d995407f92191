"""`kvplan latency` under pipeline parallelism: a static batch's prefill steps go in flight
together as vLLM 0.11's batch queue runs them (costs/step/parallel/pp_queue.py), the same
timing the simulator uses (sim/pipeline.py), so both answer the same question alike."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import kvplan
from kvplan.costs.step.latency import RequestShape, prefill_steps, request_latency
from kvplan.costs.step.profiles import profile_for
from kvplan.costs.step.roofline import StepCostModel
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import PipeTimer, workload
from kvplan.specs.serving import EngineConfig

# stage = 1 + T / 8 s, hop 0.25 s, host 0.5 s; a step alone: host + stage + hop + stage
TIMER = PipeTimer(pp=2, stage_s=1.0, per_token_s=0.125, hop_s=0.25, host_s=0.5)


def test_prompt_chunks_in_flight_hand_checked():
    """pp=2, budget 8, one 24-token prompt: three 8-token chunks, stage 1 + 8/8 = 2.0 s.

    c0 scheduled t=0: host 0-0.5, stage0 0.5-2.5, stage1 2.75-4.75 (queue not full: go on)
    c1 scheduled t=0: host 0.5-1.0, stage0 2.5-4.5, stage1 max(4.75, 4.75) = 4.75-6.75
       (queue full: block on c0, back at 4.75)
    c2 scheduled t=4.75: host 4.75-5.25, stage0 max(5.25, 4.5) = 5.25-7.25, stage1
       max(7.5, 6.75) = 7.5-9.5 -> TTFT 9.5 s (one at a time: 3 x 4.75 = 14.25 s).
    The simulator's first token lands at the same 9.5 s."""
    from kvplan.costs.step.parallel.pp_queue import prefill_back_s

    steps = prefill_steps(RequestShape(prompt_tokens=24, output_tokens=2), 8)
    assert prefill_back_s(TIMER, steps) == 9.5
    r = simulate(workload([0.0], [24], [2]), timer=TIMER, num_blocks=64, block_size=4,
                 limits=Limits(max_num_batched_tokens=8, max_num_seqs=8))
    assert r.first_token_s.tolist() == [9.5]


def test_one_stage_sums_the_steps():
    """pp=1: stage 2.0 + host 0.5 = 2.5 s a chunk, three chunks 7.5 s (unchanged)."""
    from kvplan.costs.step.parallel.pp_queue import prefill_back_s

    one = PipeTimer(pp=1, stage_s=1.0, per_token_s=0.125, host_s=0.5)
    steps = prefill_steps(RequestShape(prompt_tokens=24, output_tokens=2), 8)
    assert prefill_back_s(one, steps) == 7.5


@pytest.mark.parametrize(("pp", "before_ms", "after_ms"), [
    (1, 68.61, 68.61), (2, 68.93, 45.40), (4, 69.56, 34.97)])
def test_llama8b_h100_chunked_prompt_ttft(pp: int, before_ms: float, after_ms: float):
    """Llama-3.1-8B on H100, budget 1,024, one 3,000-token prompt: TTFT was 68.93 ms at PP2
    and 69.56 ms at PP4 (three chunks one after another, each passing every stage), now
    45.40 and 34.97 ms (the chunks in flight together; `simulate` gives the same)."""
    spec, hw = kvplan.load_model("meta-llama/Llama-3.1-8B"), kvplan.load_gpu("H100")
    engine = EngineConfig(max_num_batched_tokens=1024, pipeline_parallel_size=pp)
    r = request_latency(spec, hw, engine, RequestShape(prompt_tokens=3000, output_tokens=64))
    assert r.ttft_s * 1e3 == pytest.approx(after_ms, abs=0.005)
    assert r.e2e_s == pytest.approx(r.ttft_s + 63 * (r.tpot_s or 0.0), rel=1e-12)


@pytest.mark.parametrize("pp", [1, 2, 4])
@pytest.mark.parametrize(("batch", "prompt", "output", "budget"), [
    (1, 3000, 32, 1024),   # one prompt in three chunks
    (1, 700, 16, None),    # one prompt in one step
    (8, 300, 12, None),    # eight prompts in one step
    (4, 500, 10, 2048),    # four prompts in one step under a budget
])
def test_latency_equals_simulate(pp: int, batch: int, prompt: int, output: int,
                                 budget: int | None):
    """B identical requests at once (no API path, no arrivals): the simulator's engine
    runs the same steps as the static batch, so TTFT and TPOT agree to the microsecond."""
    spec, hw = kvplan.load_model("meta-llama/Llama-3.1-8B"), kvplan.load_gpu("H100")
    engine = EngineConfig(max_num_batched_tokens=budget, pipeline_parallel_size=pp,
                          max_model_len=prompt + output, enable_prefix_caching=False)
    shape = RequestShape(batch=batch, prompt_tokens=prompt, output_tokens=output)
    # the engine alone: no API server path in front of it (a static batch has none)
    prof = replace(profile_for(spec, hw, engine), api_request_s=0.0, api_prompt_token_s=0.0,
                   api_admission_s=0.0)
    want = request_latency(spec, hw, engine, shape, prof)
    timer = StepCostModel(spec, hw, engine, prof)
    lim = Limits(max_num_batched_tokens=budget or batch * prompt, max_num_seqs=256,
                 prefix_caching=False)
    w = workload([0.0] * batch, [prompt] * batch, [output] * batch)
    r = simulate(w, timer=timer, num_blocks=batch * (prompt + output) // 16 + 64,
                 block_size=16, limits=lim, engine=engine)
    assert r.finished.all()
    assert np.abs(r.first_token_s - want.ttft_s).max() < 1e-6
    tpot = (r.finish_s - r.first_token_s) / (output - 1)
    assert want.tpot_s is not None
    assert np.abs(tpot - want.tpot_s).max() < 1e-6
    assert np.abs(r.finish_s - want.e2e_s).max() < 1e-6


def _pp_replica(pp: int):
    from kvplan.analysis.plan.fleet import Replica
    from kvplan.specs.deployment import Deployment

    engine = EngineConfig(max_num_batched_tokens=1024, pipeline_parallel_size=pp,
                          max_model_len=4096)
    return Replica(Deployment(model=kvplan.load_model("meta-llama/Llama-3.1-8B"),
                              gpu=kvplan.load_gpu("H100"), engine=engine))


@pytest.mark.parametrize(("pp", "ms"), [(1, 68.61), (2, 45.40), (4, 34.97)])
def test_plan_zero_load_prefill_under_pp(pp: int, ms: float):
    """The planner's zero-load bound ("real latencies are never below these") prefilled a
    PP engine's chunks one at a time: 68.93 ms at PP2 and 69.56 at PP4 for a lone
    3,000-token prompt at budget 1,024, above the 45.40 / 34.97 ms the simulator gives it
    (so it pruned PP candidates that meet the SLO). Now the same as `kvplan latency`."""
    from kvplan.analysis.plan import bounds as bd

    rep = _pp_replica(pp)
    assert bd.prefill_alone_s(rep, 3000) * 1e3 == pytest.approx(ms, abs=0.005)
    points = bd._grid(3000)
    got = bd._priced_at_once(rep, points.tolist())
    ttft = got[0] if got is not None else [bd.prefill_alone_s(rep, int(p)) for p in points]
    assert ttft[-1] * 1e3 == pytest.approx(ms, abs=0.005)


def test_plan_keeps_a_pp_candidate_that_meets_the_slo():
    """Llama-3.1-8B on H100, TP1 PP2, budget 1,024, 20 prompts of 3,000 tokens at 0.5 req/s,
    SLO ttft:p50:105 ms: `simulate` gives a median TTFT of 97.1 ms (51.7 ms of API path +
    45.4 ms of engine), but the zero-load bound read 111.64 ms (its API path 42.71 ms +
    68.93 ms of chunks one at a time) and `kvplan plan` pruned the candidate ("nothing
    feasible"). Now 42.71 + 45.40 = 88.11 ms, below the simulator's, and the bound passes."""
    from kvplan.analysis.plan import bounds as bd
    from tests.plan_helpers import poisson_workload, slo

    work = poisson_workload(20, 0.5, prompt=3000, output=32, seed=0, spread=0.0)
    b = bd.bounds(_pp_replica(2), work, slo("ttft:p50:105"))
    assert dict(b.zero_load.achieved)["p50_ttft_ms"] == pytest.approx(88.11, abs=0.01)
    assert b.zero_load.ok
