"""The API server's serial admission (Profile.api_admission_s): one FIFO process admits the
requests one at a time in send order, then each takes the parallel path (api_delays_s).
Exact step traces (LinearTimer: 1 s per step), the FIFO rule, hypothesis invariants (fast
path == step by step; nobody reaches the engine before its turn), and the replay: exact at
concurrency 1, an approximation bounded against the simulator when requests queue."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.calibration.public_set import serving_replay
from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_serving
from kvplan.costs.step.profile import Profile
from kvplan.sim.frontend import fifo_exits
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import ArrayWorkload, workload
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig
from tests.test_api_delay import ApiTimer
from tests.test_sim_scheduler import run, tokens

MODEL = "meta-llama/Llama-3.1-8B"


def test_fifo_exits_queue_behind_the_one_before():
    # sent 0, 0, 0, 2.0; 0.5 s each: 0.5, 1.0, 1.5, then idle until 2.0 -> 2.5
    got = fifo_exits(np.array([0.0, 0.0, 0.0, 2.0]), np.full(4, 0.5))
    assert got.tolist() == [0.5, 1.0, 1.5, 2.5]


def test_open_loop_requests_sent_together_reach_the_engine_one_admission_apart():
    # A, B, C (4 + 2 each) all sent at 0, admission 0.25 s: at the engine 0.25, 0.5, 0.75.
    #   0.25 |A4|  1.25 |A1 B4 C4|  2.25 |B1 C1|      (B, C arrived during A's prefill)
    # TTFT A 1.25, B and C 2.25 (vs 1.0 each with every request admitted at once).
    r = run(workload([0, 0, 0], [4, 4, 4], [2, 2, 2]), timer=ApiTimer(admit_s=0.25))
    assert r.sent_s.tolist() == [0.0, 0.0, 0.0]
    assert r.steps.start_s.tolist() == [0.25, 1.25, 2.25]
    assert r.steps.new_tokens.tolist() == [4, 9, 2]
    assert r.scheduled_s.tolist() == [0.25, 1.25, 1.25]
    assert (r.first_token_s - r.sent_s).tolist() == [1.25, 2.25, 2.25]
    assert tokens(r, 0) == [1.25, 2.25] and tokens(r, 2) == [2.25, 3.25]


def test_closed_loop_admission_then_delay_step_trace():
    # Concurrency 2, admission 0.25 s then delay 0.5 s, prompts 4, outputs 2.
    # A sent 0: server 0-0.25, engine 0.75. B sent 0: server 0.25-0.5, engine 1.0.
    #   0.75 |A4|  1.75 |A1 B4|  2.75 |B1|  3.75 |C4|  4.75 |C1|
    # C is sent at 2.75 (A's slot frees); the server is idle: out 3.0, at the engine 3.5,
    # inside B's last step, so it starts at 3.75. TTFT A 1.75, B 2.75, C 4.75 - 2.75 = 2.0.
    r = run(workload([0, 0, 0], [4, 4, 4], [2, 2, 2], concurrency=2),
            timer=ApiTimer(api_s=0.5, admit_s=0.25))
    assert r.steps.start_s.tolist() == [0.75, 1.75, 2.75, 3.75, 4.75]
    assert r.steps.new_tokens.tolist() == [4, 5, 1, 4, 1]
    assert r.sent_s.tolist() == [0.0, 0.0, 2.75]
    assert r.scheduled_s.tolist() == [0.75, 1.75, 3.75]
    assert (r.first_token_s - r.sent_s).tolist() == [1.75, 2.75, 2.0]


def test_no_admission_cost_changes_nothing():
    w = workload([0, 0, 0.3], [9, 4, 4], [3, 2, 2], concurrency=2)
    a, b = run(w, timer=ApiTimer(api_s=0.5)), run(w, timer=ApiTimer(api_s=0.5, admit_s=0.0))
    assert a.finish_s.tolist() == b.finish_s.tolist()
    assert a.first_token_s.tolist() == b.first_token_s.tolist()


@st.composite
def cases(draw):
    n = draw(st.integers(1, 20))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.01, 0.1]), min_size=n, max_size=n))
    w = ArrayWorkload(arrival_s=np.cumsum(gaps),
                      prompt_tokens=np.array(draw(st.lists(st.integers(1, 40), min_size=n,
                                                           max_size=n))),
                      output_tokens=np.array(draw(st.lists(st.integers(1, 12), min_size=n,
                                                           max_size=n))),
                      closed_loop_concurrency=draw(st.none() | st.integers(1, 4)))
    timer = ApiTimer(base_s=0.01, per_token_s=1e-4, api_s=draw(st.sampled_from([0.0, 0.02])),
                     admit_s=draw(st.floats(0.001, 0.05)))
    lim = Limits(max_num_batched_tokens=draw(st.integers(8, 64)),
                 max_num_seqs=draw(st.integers(1, 6)), chunked_prefill=True,
                 prefix_caching=False)
    return w, timer, lim


@settings(max_examples=60, deadline=None)
@given(cases())
def test_invariants_with_admission(case):
    w, timer, lim = case
    slow, fast = (simulate(w, timer=timer, num_blocks=200, block_size=4, limits=lim, fast=f,
                           validate=True) for f in (False, True))
    assert np.array_equal(slow.finish_s, fast.finish_s, equal_nan=True)
    assert np.array_equal(slow.sent_s, fast.sent_s, equal_nan=True)
    assert bool(fast.finished.all())
    # one FIFO server in send order: nobody is scheduled before its admission and delay
    order = np.lexsort((np.arange(len(fast.sent_s)), fast.sent_s))
    exits = np.empty(len(order))
    exits[order] = fifo_exits(fast.sent_s[order], np.full(len(order), timer.admit_s))
    assert np.all(fast.scheduled_s >= exits + timer.api_s - 1e-9)
    assert np.all(fast.sent_s >= w.arrival_s - 1e-12)


def _sim(engine, work, prof):
    m = compute_metrics(simulate_serving(MODEL, "H100-SXM-80GB", engine, work,
                                         profile=prof).result)
    return {"ttft_s": m.stats["ttft"].mean_ms / 1e3, "tpot_s": m.stats["tpot"].mean_ms / 1e3,
            "output_throughput_tok_s": m.output_throughput}


def test_replay_with_admission_at_concurrency_1_equals_simulating():
    # the server is idle whenever a request is sent: admission is one more delay, exact
    engine = EngineConfig(max_num_batched_tokens=2048)
    work = build_workload(WorkloadArgs(num_prompts=6, random_input_len=700,
                                       random_output_len=30, max_concurrency=1))
    prof = Profile(api_request_s=0.01, api_admission_s=0.004)
    got, want = serving_replay(MODEL, "H100-SXM-80GB", engine, work).metrics(prof), _sim(
        engine, work, prof)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-9)


def test_replay_with_admission_queue_stays_near_the_simulator():
    # 400 prompts at once, 10 ms each on the server (4 s of admissions): the replay adds each
    # request's wait beyond its recorded engine wait; the simulator is exact. TTFT within
    # 10%. TPOT is the recorded batches' whatever the queue (the limit of a replay): in the
    # simulator requests trickle in, batches are smaller and TPOT lower. That is why the
    # calibration report prices served runs by simulating them again.
    engine = EngineConfig(max_num_batched_tokens=8192)
    work = build_workload(WorkloadArgs(num_prompts=400, random_input_len=200,
                                       random_output_len=100))
    prof = Profile(api_request_s=0.02, api_admission_s=0.01)
    replay = serving_replay(MODEL, "H100-SXM-80GB", engine, work)
    got, want = replay.metrics(prof), _sim(engine, work, prof)
    plain = _sim(engine, work, Profile(api_request_s=0.02))
    assert want["ttft_s"] > 1.5 * plain["ttft_s"]  # the queue is what the TTFT is
    assert got["ttft_s"] == pytest.approx(want["ttft_s"], rel=0.10)
    assert got["tpot_s"] == pytest.approx(
        replay.metrics(Profile(api_request_s=0.02))["tpot_s"], rel=1e-12)
    assert want["tpot_s"] < got["tpot_s"]
