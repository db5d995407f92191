"""Hunt 17 (par17): parallel serving, latency against the simulator (PP / DP / EP)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.costs.step.latency import RequestShape, request_latency
from kvplan.costs.step.parallel.pp_queue import StaticQueue, split
from kvplan.costs.step.profiles import profile_for
from kvplan.costs.step.roofline import StepCostModel
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import PipeTimer, workload
from kvplan.specs.serving import EngineConfig

# stage = 1 + T / 8 s, hop 0.25 s, host 0.5 s; a batch alone: host + stage + hop + stage
TIMER = PipeTimer(pp=2, stage_s=1.0, per_token_s=0.125, hop_s=0.25, host_s=0.5)


def test_static_batch_decodes_in_the_groups_its_prefill_batches_made():
    """pp=2, budget 8, three 4-token prompts, 2 outputs (tests/test_pp_batch_queue.py's
    trace of vLLM's step_with_batch_queue: a request whose last token is in flight is
    skipped, v1/core/sched/scheduler.py "num_new_tokens == 0 ... PP>1"):

    B0 {r0, r1} prompts   back 4.75   B1 {r2} prompt   back 6.25 (TTFT, the last first token)
    B2 {r0, r1} decodes   scheduled 4.75: host 4.75-5.25, stage0 5.25-6.5, stage1 6.75-8.0
    B3 {r2} decode        scheduled 6.25: host -6.75, stage0 6.75-7.875, stage1 8.125-9.25
    E2E 9.25 s (r2's last token), TPOT (9.25 - 6.25) / 1 = 3.0 s. The one-batch decode
    (all three in one step of stage 1 + 3/8: 1.375 + 0.25 + 1.375 + 0.5 = 3.5 s after 6.25)
    gave E2E 9.75 s, a batch vLLM does not run."""
    sp = split(TIMER, 8)
    assert sp is not None
    q = StaticQueue(TIMER, sp, (3, 4, 2), 8)
    assert q.run() == (6.25, 9.25)
    assert q.first.tolist() == [4.75, 4.75, 6.25]


@pytest.mark.parametrize(("pp", "batch", "prompt", "output", "budget", "e2e_before_ms"), [
    (2, 64, 1000, 128, 8192, 2826.8),  # 8 prefill batches: 2 groups decode in flight
    (2, 4, 500, 64, 1024, 511.2),
    (4, 8, 500, 64, 1024, 555.4),
])
def test_latency_under_pp_equals_the_simulated_batch_queue(pp, batch, prompt, output, budget,
                                                           e2e_before_ms):
    """Llama-3.1-8B on H100: B alike requests at once, no API path. latency priced every
    decode step as one batch of all B behind the last prefill batch (64 x 1000 / 8192, PP2:
    E2E 2826.8 ms, 2,898 tok/s); vLLM's batch queue decodes them in the groups their prompts
    completed in, in flight together, as `kvplan simulate` runs them: E2E = the last finish
    (2223.3 ms, 3,685 tok/s), TTFT = the last first token, throughput B x O / E2E."""
    spec, hw = kvplan.load_model("meta-llama/Llama-3.1-8B"), kvplan.load_gpu("H100")
    engine = EngineConfig(max_num_batched_tokens=budget, pipeline_parallel_size=pp,
                          max_model_len=prompt + output, enable_prefix_caching=False)
    prof = replace(profile_for(spec, hw, engine), api_request_s=0.0, api_prompt_token_s=0.0,
                   api_admission_s=0.0)
    got = request_latency(spec, hw, engine, RequestShape(
        batch=batch, prompt_tokens=prompt, output_tokens=output), prof)
    r = simulate(workload([0.0] * batch, [prompt] * batch, [output] * batch),
                 timer=StepCostModel(spec, hw, engine, prof),
                 num_blocks=batch * (prompt + output) // 16 + 64, block_size=16,
                 limits=Limits(max_num_batched_tokens=budget, max_num_seqs=1024,
                               prefix_caching=False), engine=engine)
    assert got.e2e_s == pytest.approx(float(r.finish_s.max()), abs=1e-6)
    assert got.ttft_s == pytest.approx(float(r.first_token_s.max()), abs=1e-6)
    assert got.output_throughput_tok_s == pytest.approx(batch * output / r.finish_s.max())
    assert got.e2e_s * 1e3 < e2e_before_ms - 10
    assert got.tpot_s == pytest.approx((got.e2e_s - got.ttft_s) / (output - 1), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(pp=st.integers(2, 4), batch=st.integers(1, 12), prompt=st.integers(1, 20),
       output=st.integers(1, 12), budget=st.integers(1, 40),
       host=st.sampled_from([0.0, 0.5, 3.0]))
def test_grouped_decode_equals_batch_by_batch_and_the_simulator(pp, batch, prompt, output,
                                                                 budget, host):
    """Invariant: the group-by-group decode (StaticQueue.steady) ends exactly where the
    batch-by-batch loop does, and both equal the simulator's pipeline (sim/pipeline.py) on
    the same requests: its last first token and last finish."""
    timer = PipeTimer(pp=pp, stage_s=1.0, per_token_s=0.125, hop_s=0.25, host_s=host)
    sp = split(timer, budget)
    assert sp is not None
    fast = StaticQueue(timer, sp, (batch, prompt, output), budget)
    slow = StaticQueue(timer, sp, (batch, prompt, output), budget)
    slow.steady = False
    got = fast.run()
    assert got == slow.run()
    r = simulate(workload([0.0] * batch, [prompt] * batch, [output] * batch), timer=timer,
                 num_blocks=batch * (prompt + output) + 8, block_size=1,
                 limits=Limits(max_num_batched_tokens=budget, max_num_seqs=batch,
                               prefix_caching=False), validate=True)
    assert got == (float(r.first_token_s.max()), float(r.finish_s.max()))
    assert np.all(r.finished)


class _AdmittingTimer:
    """step = 1 + 0.1 x padded tokens; the API server admits one request per 0.5 s, serially
    (Profile.api_admission_s), with no parallel delay."""

    def __init__(self) -> None:
        from kvplan.sim.testing import LinearTimer

        self.t = LinearTimer(base_s=1.0, per_token_s=0.1)

    def step_time_s(self, new, ctx):
        return self.t.step_time_s(new, ctx)

    def api_delays_s(self, prompt):
        return np.zeros(len(prompt))

    def api_admissions_s(self, prompt):
        return np.full(len(prompt), 0.5)


def test_dp_fleet_requests_pass_the_one_api_servers_serial_admission():
    """vLLM 0.11.0's `vllm serve --data-parallel-size N` runs one API server
    (--api-server-count default 1, entrypoints/cli/serve.py; the default became dp_size only
    in vllm-project/vllm#32525, 2026-01-17), so a DP fleet's requests pass the same serial
    admission as one engine's (sim/frontend.py: S = max(t, S_prev) + 0.5).

    Two 4-token prompts, 1 output, both sent at t 0, 2 ranks: r0 leaves the API server at 0.5
    -> rank 0; r1 at 1.0 -> rank 1 (scores 4, 0). Step 0 [0.5, 1.9] (rank 0: 4 tokens, rank 1
    dummy, pad 4: 1.4 s): r0 done at 1.9. Step 1 [1.9, 3.3]: rank 1 r1 (pad 4) done at 3.3.
    Before, the fleet skipped the admission: both at t 0, one step [0, 1.4], both done at 1.4.
    """
    from kvplan.sim.blocks import KvShape
    from kvplan.sim.dp.lockstep import RankSim, simulate_dp

    sim = RankSim(ranks=2, timer=_AdmittingTimer(), num_blocks=100,  # type: ignore[arg-type]
                  shape=KvShape(block_size=16), limits=Limits(max_num_batched_tokens=8,
                                                              max_num_seqs=4))
    r = simulate_dp(workload([0.0, 0.0], [4, 4], [1, 1]), sim, validate=True)
    assert r.rank_of.tolist() == [0, 1]
    np.testing.assert_allclose(r.fleet.first_token_s, [1.9, 3.3])
    np.testing.assert_allclose(r.fleet.steps.start_s[:2], [0.5, 1.9])


@settings(max_examples=40, deadline=None)
@given(ranks=st.integers(1, 3), admission=st.sampled_from([0.0, 0.05, 0.5]),
       reqs=st.lists(st.tuples(st.floats(0.0, 5.0), st.integers(1, 12), st.integers(1, 4)),
                     min_size=1, max_size=12))
def test_dp_fleet_never_schedules_before_the_api_server_admits(ranks, admission, reqs):
    """Invariant: every request of a DP fleet is scheduled no earlier than it leaves the one
    API server's FIFO admission (sim/frontend.engine_arrivals), and all finish."""
    from kvplan.sim.blocks import KvShape
    from kvplan.sim.dp.lockstep import RankSim, simulate_dp
    from kvplan.sim.frontend import engine_arrivals

    timer = _AdmittingTimer()
    timer.api_admissions_s = lambda prompt: np.full(len(prompt), admission)  # type: ignore
    w = workload([a for a, _, _ in reqs], [p for _, p, _ in reqs], [o for _, _, o in reqs])
    sim = RankSim(ranks=ranks, timer=timer, num_blocks=64,  # type: ignore[arg-type]
                  shape=KvShape(block_size=16), limits=Limits(max_num_batched_tokens=16,
                                                              max_num_seqs=4))
    f = simulate_dp(w, sim, validate=True).fleet
    at = engine_arrivals(timer, w.arrival_s, w.prompt_tokens)
    assert f.finished.all()
    assert np.all(f.scheduled_s >= at - 1e-12)
    exits = np.sort(at)
    assert np.all(np.diff(exits) >= admission - 1e-9)
