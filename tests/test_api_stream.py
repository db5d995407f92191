"""The API server's token stream (Profile.api_stream_token_s): its one process detokenises and
sends every token the engine emits, one step's tokens after another, so a client receives a
token when that stream reaches it. Exact traces (LinearTimer: 1 s per step), the FIFO rule,
the replay against the simulator, and the engine's own schedule left unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.analysis.calibration.public_set import serving_replay
from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_serving
from kvplan.costs.step.profile import Profile
from kvplan.sim.frontend import step_tokens, stream_delivery
from kvplan.sim.testing import workload
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig
from tests.test_api_delay import ApiTimer
from tests.test_sim_scheduler import run, tokens

MODEL = "meta-llama/Llama-3.1-8B"


def test_stream_delivery_is_one_fifo_server_over_the_steps():
    # steps end at 1, 2, 3 with 4, 4, 1 tokens, 0.5 s a token:
    #   D0 = 1 + 2 = 3;  D1 = max(2, 3) + 2 = 5;  D2 = max(3, 5) + 0.5 = 5.5
    got = stream_delivery(np.array([1.0, 2.0, 3.0]), np.array([4, 4, 1]), 0.5)
    assert got.tolist() == [3.0, 5.0, 5.5]
    # a server faster than the engine: each step's tokens leave right after it
    fast = stream_delivery(np.array([1.0, 2.0, 3.0]), np.array([4, 4, 1]), 0.0625)
    assert fast.tolist() == [1.25, 2.25, 3.0625]


def test_step_tokens_counts_the_emission_runs_over_each_step():
    # runs: A over steps 0-3, B over 1-2 and 4-5 -> 1, 2, 2, 1, 1, 1
    assert step_tokens(6, np.array([0, 1, 4]), np.array([3, 2, 5])).tolist() == [1, 2, 2, 1, 1, 1]


def test_two_streams_reach_their_clients_behind_the_server():
    # A and B (4 + 3 each) sent at 0; engine steps 0-1 |A4 B4|, 1-2 |A1 B1|, 2-3 |A1 B1|, each
    # emitting 2 tokens. At 0.75 s a token the stream delivers 2.5, 4.0, 5.5:
    # TTFT 2.5 s (1.0 at the engine), E2E 5.5 s, TPOT (5.5 - 2.5) / 2 = 1.5 s (1.0 at the engine).
    r = run(workload([0, 0], [4, 4], [3, 3]), timer=ApiTimer(stream_s=0.75))
    assert r.steps.end_s.tolist() == [1.0, 2.0, 3.0]  # the engine's schedule is unchanged
    assert r.delivery_s is not None and r.delivery_s.tolist() == [2.5, 4.0, 5.5]
    assert r.first_token_s.tolist() == [2.5, 2.5] and r.finish_s.tolist() == [5.5, 5.5]
    assert tokens(r, 0) == [2.5, 4.0, 5.5]
    m = compute_metrics(r, percentile_metrics=("ttft", "tpot", "itl"))
    assert m.stats["tpot"].mean_ms == pytest.approx(1500.0)
    assert m.stats["itl"].mean_ms == pytest.approx(1500.0)
    assert m.output_throughput == pytest.approx(6 / 5.5)


def test_no_stream_cost_leaves_the_result_as_it_was():
    w = workload([0, 0, 1], [4, 5, 3], [3, 2, 4])
    plain, free = run(w, timer=ApiTimer()), run(w, timer=ApiTimer(stream_s=0.0))
    assert plain.delivery_s is None and free.delivery_s is None
    assert free.first_token_s.tolist() == plain.first_token_s.tolist()


def test_streaming_delays_tokens_never_brings_them_forward():
    w = workload([0, 0, 0.5, 2.0], [6, 4, 9, 3], [5, 2, 4, 6])
    base, slow = run(w, timer=ApiTimer(api_s=0.2)), run(w, timer=ApiTimer(api_s=0.2,
                                                                           stream_s=0.3))
    assert slow.steps.end_s.tolist() == base.steps.end_s.tolist()
    assert np.all(slow.first_token_s >= base.first_token_s)
    assert np.all(slow.finish_s >= base.finish_s)
    for i in range(4):
        assert np.all(np.diff(tokens(slow, i)) >= 0.3)  # one token at least, 0.3 s each


@pytest.mark.parametrize("stream", [20e-6, 200e-6])
def test_the_replay_equals_the_simulator_with_a_stream_cost(stream):
    # 200 prompts at once (rate inf), no other API cost: the replay adds each step's stream
    # lag to the recorded times, the simulator streams its own steps - the same figures
    eng = EngineConfig()
    work = build_workload(WorkloadArgs(num_prompts=200, random_input_len=300,
                                       random_output_len=64, seed=3))
    prof = Profile(step_overhead_s=1e-3, api_stream_token_s=stream)
    rep = serving_replay(MODEL, "H100", eng, work).metrics(prof)
    sim = simulate_serving(MODEL, "H100", eng, work, profile=prof)
    m = compute_metrics(sim.result, percentile_metrics=("ttft", "tpot"))
    assert rep["ttft_s"] == pytest.approx(m.stats["ttft"].mean_ms / 1e3, rel=1e-9)
    assert rep["tpot_s"] == pytest.approx(m.stats["tpot"].mean_ms / 1e3, rel=1e-9)
    assert rep["output_throughput_tok_s"] == pytest.approx(m.output_throughput, rel=1e-9)
    if stream == 200e-6:  # 200 streams at 200 us a token: at most 5,000 tok/s reach clients
        assert m.output_throughput <= 5000.0 * (1 + 1e-9)
