"""The API server's per-request path (Profile.api_request_s + api_prompt_token_s x prompt):
a served request reaches the engine that long after the client sends it. Exact step traces
(LinearTimer: 1 s per step), FCFS by engine arrival, the closed loop's slot gap, and
hypothesis invariants (nothing lost, fast path == step by step, every request reaches the
engine its delay after it was sent)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.calibration.public_set import serving_replay
from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_serving
from kvplan.costs.step.profile import Profile
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import ArrayWorkload, LinearTimer, workload
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig
from tests.test_sim_scheduler import run, tokens

MODEL = "meta-llama/Llama-3.1-8B"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiTimer(LinearTimer):
    """LinearTimer plus the API path: fixed api_s + api_token_s per prompt token, and
    admit_s of the API server's one process per request (FIFO, sim.frontend)."""

    api_s: float = 0.0
    api_token_s: float = 0.0
    admit_s: float = 0.0

    def api_delays_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        return self.api_s + self.api_token_s * prompt_tokens.astype(np.float64)

    def api_admissions_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        return np.full(len(prompt_tokens), self.admit_s)


def test_profile_api_delay_is_fixed_plus_per_prompt_token():
    p = Profile(api_request_s=0.02, api_prompt_token_s=2e-6)
    assert p.api_delay_s(5000) == 0.02 + 0.01  # 20 ms + 5000 x 2 us
    assert Profile().api_delay_s(5000) == 0.0  # a static batch / old profile: none


def test_open_loop_request_reaches_the_engine_after_its_delay():
    # A (4 + 2) sent at 0 reaches the engine at 0.25: steps 0.25-1.25 (prefill, first token)
    # and 1.25-2.25 (decode). TTFT = 1.25 - 0 = 1.25 s, ITL untouched (1 s).
    r = run(workload([0], [4], [2]), timer=ApiTimer(api_s=0.25))
    assert r.sent_s[0] == 0.0 and r.scheduled_s[0] == 0.25
    assert r.steps.start_s.tolist() == [0.25, 1.25]
    assert tokens(r, 0) == [1.25, 2.25]
    assert r.first_token_s[0] - r.sent_s[0] == 1.25


def test_open_loop_is_fcfs_by_engine_arrival():
    # 0.1 s per prompt token: A (10 tokens, sent 0) reaches the engine at 1.0; B (2 tokens,
    # sent 0.2) at 0.4, so B runs first (0.4-1.4); A arrived inside that step and starts at 1.4.
    r = run(workload([0, 0.2], [10, 2], [2, 2]), timer=ApiTimer(api_token_s=0.1))
    assert r.sent_s.tolist() == [0.0, 0.2]
    assert r.scheduled_s.tolist() == [1.4, 0.4]
    assert r.steps.new_tokens.tolist() == [2, 11, 1]
    assert tokens(r, 1) == [1.4, 2.4] and tokens(r, 0) == [2.4, 3.4]


def test_closed_loop_next_request_reaches_the_engine_its_delay_after_the_slot_frees():
    # Concurrency 1, delay 0.5 s. A: sent 0, at the engine 0.5, first token 1.5, done 2.5.
    # B: sent 2.5 (A's slot frees), at the engine 3.0, first token 4.0, done 5.0.
    # Client TTFT of each = 0.5 + 1 = 1.5 s; E2E 2.5 s; the engine idles 2.5-3.0.
    r = run(workload([0, 0], [4, 4], [2, 2], concurrency=1), timer=ApiTimer(api_s=0.5))
    assert r.sent_s.tolist() == [0.0, 2.5]
    assert r.scheduled_s.tolist() == [0.5, 3.0]
    assert r.steps.start_s.tolist() == [0.5, 1.5, 3.0, 4.0]
    assert (r.first_token_s - r.sent_s).tolist() == [1.5, 1.5]
    assert (r.finish_s - r.sent_s).tolist() == [2.5, 2.5]


def test_closed_loop_long_prompts_step_trace():
    # Issue 9 item 5's shape, small: concurrency 2, prompts of 12 tokens under a budget of 8,
    # outputs 2, delay 0.5 s. A and B reach the engine at 0.5:
    #   0.5 |A8|  1.5 |A4 B4|  2.5 |A1 B7|  3.5 |B1|          A: tokens 2.5, 3.5 (done)
    # C is sent at 3.5 (A's slot frees), reaches the engine at 4.0, inside B's last prefill
    # step, so its first chunk runs at 4.5 beside B's decode:
    #   4.5 |B1 C7|  5.5 |C5|  6.5 |C1 D7|  7.5 |D5|  8.5 |D1|
    # D is sent at 5.5 (B done), reaches the engine at 6.0 and starts at 6.5.
    # Client TTFT: A 2.5, B 4.5, C 6.5 - 3.5 = 3.0, D 8.5 - 5.5 = 3.0 (each includes 0.5).
    r = run(workload([0] * 4, [12] * 4, [2] * 4, concurrency=2), budget=8,
            timer=ApiTimer(api_s=0.5))
    assert r.steps.start_s.tolist() == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5]
    assert r.steps.new_tokens.tolist() == [8, 8, 8, 1, 8, 5, 8, 5, 1]
    assert r.sent_s.tolist() == [0.0, 0.0, 3.5, 5.5]
    assert r.scheduled_s.tolist() == [0.5, 1.5, 4.5, 6.5]
    assert (r.first_token_s - r.sent_s).tolist() == [2.5, 4.5, 3.0, 3.0]
    assert r.finish_s.tolist() == [3.5, 5.5, 7.5, 9.5]


@st.composite
def cases(draw):
    n = draw(st.integers(1, 20))
    gaps = draw(st.lists(st.floats(0, 0.2), min_size=n, max_size=n))
    prompts = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 12), min_size=n, max_size=n))
    w = ArrayWorkload(arrival_s=np.cumsum(gaps), prompt_tokens=np.array(prompts),
                      output_tokens=np.array(outputs),
                      closed_loop_concurrency=draw(st.none() | st.integers(1, 4)))
    timer = ApiTimer(base_s=0.01, per_token_s=1e-4, api_s=draw(st.floats(0, 0.05)),
                     api_token_s=draw(st.sampled_from([0.0, 1e-3])))
    lim = Limits(max_num_batched_tokens=draw(st.integers(8, 64)),
                 max_num_seqs=draw(st.integers(1, 6)), chunked_prefill=True,
                 prefix_caching=False)
    return w, timer, lim


@settings(max_examples=60, deadline=None)
@given(cases())
def test_invariants_with_api_delay(case):
    w, timer, lim = case
    slow, fast = (simulate(w, timer=timer, num_blocks=200, block_size=4, limits=lim, fast=f,
                           validate=True) for f in (False, True))
    assert np.array_equal(slow.finish_s, fast.finish_s, equal_nan=True)
    assert np.array_equal(slow.sent_s, fast.sent_s, equal_nan=True)
    assert bool(fast.finished.all())  # nothing lost
    delay = timer.api_delays_s(w.prompt_tokens)
    # a request is scheduled no earlier than it reaches the engine, and is sent no earlier
    # than its arrival
    assert np.all(fast.scheduled_s >= fast.sent_s + delay - 1e-9)
    assert np.all(fast.sent_s >= w.arrival_s - 1e-12)
    assert np.all(fast.first_token_s - fast.sent_s >= delay + timer.base_s - 1e-9)


@pytest.mark.parametrize(("conc", "n", "prompt", "out"), [
    (1, 6, 700, 30),  # each request waits on every earlier one's delay: exact
    (None, 24, 900, 20),  # all sent at 0, all reach the engine at the same delay: exact
    (4, 16, 300, 40),  # fixed lengths finish together: each wave idles one delay, exact
])
def test_replay_with_api_delay_equals_simulating(conc, n, prompt, out):
    engine = EngineConfig(max_num_batched_tokens=2048)
    work = build_workload(WorkloadArgs(num_prompts=n, random_input_len=prompt,
                                       random_output_len=out, max_concurrency=conc))
    replay = serving_replay(MODEL, "H100-SXM-80GB", engine, work)
    prof = Profile(api_request_s=0.015, api_prompt_token_s=3e-6)
    got = replay.metrics(prof)
    m = compute_metrics(simulate_serving(MODEL, "H100-SXM-80GB", engine, work,
                                         profile=prof).result)
    assert got["ttft_s"] == pytest.approx(m.stats["ttft"].mean_ms / 1e3, rel=1e-9)
    assert got["tpot_s"] == pytest.approx(m.stats["tpot"].mean_ms / 1e3, rel=1e-9)
    assert got["output_throughput_tok_s"] == pytest.approx(m.output_throughput, rel=1e-9)
    # and the delay is all there: 15 ms + 3 us x prompt on top of the engine's TTFT
    plain = replay.metrics(Profile())
    assert got["ttft_s"] - plain["ttft_s"] == pytest.approx(0.015 + 3e-6 * prompt, rel=1e-9)
    assert got["tpot_s"] == pytest.approx(plain["tpot_s"], rel=1e-12)
