"""Async scheduling after an idle spell (vLLM --async-scheduling): the engine prepares step
n + 1 while the GPU runs step n, so a step's host work (the step overhead and the per-request
work) hides under the step before it. A step that starts on an idle engine has no step before
it: it costs what it costs synchronously. ``latency`` priced its static batch's first step so;
``simulate`` hid that host work in every step (4 prompts at concurrency 1 on Llama-3.1-8B /
H100: mean TTFT 71.15 ms async against 72.17 ms sync, for a prompt that is one step either
way). Both loops (the Python loop and the compiled core) and the DP fleet now price the first
step after idle with the synchronous timer (costs.step.batch.idle_timer)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.costs.step.parallel.dp_pad import padded_step_s
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.roofline import StepCostModel
from kvplan.sim.blocks import KvShape
from kvplan.sim.disagg.fleet import simulate_disagg
from kvplan.sim.dp.lockstep import RankSim, simulate_dp
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import workload
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.core_helpers import assert_same, python_loop
from tests.test_disagg_compiled import _both, assert_same_fleet
from tests.test_disagg_properties import fleets
from tests.test_disagg_trace import COST
from tests.test_disagg_trace import _pool as trace_pool

MODEL = "meta-llama/Llama-3.1-8B"
PROF = Profile(step_overhead_s=1e-3, prefill_overhead_s=4e-3, request_overhead_s=50e-6)
LIMITS = Limits(max_num_batched_tokens=2048, max_num_seqs=16)
I1, C512 = np.array([1]), np.array([512])


def _pair() -> tuple[StepCostModel, StepCostModel]:
    model, gpu = load_model(MODEL), load_gpu("H100")
    return (StepCostModel(model, gpu, EngineConfig(), PROF),
            StepCostModel(model, gpu, EngineConfig(async_scheduling=True), PROF))


def _run(timer: StepCostModel, arrivals: list[float], n_out: int = 4):
    w = workload(arrivals, [512] * len(arrivals), [n_out] * len(arrivals))
    return simulate(w, timer=timer, num_blocks=1000, block_size=16, limits=LIMITS,
                    validate=True)


def _durations(r) -> list[float]:
    return (r.steps.end_s - r.steps.start_s).tolist()


def test_the_step_after_idle_costs_its_host_work_and_the_rest_hide_it() -> None:
    """Two requests 10 s apart (the engine idles between): each one's prefill step starts
    on an idle engine. Prefill of 512 from nothing: sync = stage + 1 ms + 4 ms + 50 us;
    the decodes over 512+ tokens: async = max(stage, 1.05 ms) = stage (the GPU's part is the
    longer), 1.05 ms below sync."""
    sync, asy = _pair()
    got = _durations(_run(asy, [0.0, 10.0]))
    pre_sync = sync.step_time_s(np.array([512]), np.array([0]))
    pre_async = asy.step_time_s(np.array([512]), np.array([0]))
    assert pre_sync - pre_async == pytest.approx(1e-3 + 50e-6, rel=1e-9)  # the hidden host
    decodes = [asy.step_time_s(I1, C512 + k) for k in range(3)]
    assert got == pytest.approx([pre_sync, *decodes, pre_sync, *decodes], rel=1e-12)
    assert decodes[0] == pytest.approx(sync.step_time_s(I1, C512) - 1.05e-3, rel=1e-9)


def test_a_burst_pays_the_host_work_of_its_first_step_only() -> None:
    """Three prompts at once: one prefill step of 3 x 512 (idle: sync), then decodes."""
    sync, asy = _pair()
    got = _durations(_run(asy, [0.0, 0.0, 0.0], n_out=2))
    new, ctx = np.full(3, 512), np.zeros(3, dtype=np.int64)
    assert got == pytest.approx([sync.step_time_s(new, ctx), asy.step_time_s(
        np.ones(3, dtype=np.int64), np.full(3, 512))], rel=1e-12)


def test_without_async_scheduling_nothing_changes() -> None:
    sync, _ = _pair()
    got = _durations(_run(sync, [0.0, 10.0], n_out=2))
    pre = sync.step_time_s(np.array([512]), np.array([0]))
    dec = sync.step_time_s(I1, C512)
    assert got == pytest.approx([pre, dec, pre, dec], rel=1e-12)


@pytest.mark.parametrize("arrivals", [[0.0, 10.0], [0.0, 0.0, 0.0], [0.0, 0.004, 0.5, 0.5]])
def test_the_core_and_the_python_loop_agree_after_idle(arrivals: list[float]) -> None:
    _, asy = _pair()
    fast = _run(asy, arrivals)
    with python_loop():
        slow = _run(asy, arrivals)
    assert_same(fast, slow)
    w = workload(arrivals, [512] * len(arrivals), [4] * len(arrivals))
    general = simulate(w, timer=asy, num_blocks=1000, block_size=16, limits=LIMITS, fast=False)
    assert_same(fast, general)


def test_a_dp_wave_s_first_step_starts_on_idle_engines() -> None:
    """Two DP ranks, one request each 10 s apart: each starts a wave (the first wave ends
    at its 32-step check), so each one's prefill step is priced synchronously; the dummy
    and decode steps inside a wave hide their host work."""
    sync, asy = _pair()
    sim = RankSim(ranks=2, timer=asy, num_blocks=1000, shape=KvShape(block_size=16),
                  limits=LIMITS)
    r = simulate_dp(workload([0.0, 10.0], [512, 512], [2, 2]), sim, validate=True)
    steps = r.rank_step_s
    empty = np.zeros(0, dtype=np.int64)
    pre_sync = padded_step_s(sync, np.array([512]), np.array([0]), 512)
    assert steps[0].tolist() == [pre_sync, padded_step_s(sync, empty, empty, 512)]
    assert steps[1, 0] == padded_step_s(asy, I1, C512, 1)
    second = 32  # the first wave: 32 steps, its check finds no work
    assert steps[second].max() == pre_sync
    assert steps[second + 1].max() == padded_step_s(asy, I1, C512, 1)


@settings(max_examples=8, deadline=None)  # ~1 s each: both fleets on the roofline timer
@given(fleets(), st.sampled_from([1, 2]))
def test_a_disaggregated_fleet_under_async_scheduling_agrees_core_and_python(case, dec_n):
    """Prefill and decode instances under async scheduling: each instance's first step
    after an idle (or stalled) spell is priced synchronously, the compiled fleet equal to
    the Python fleet to the bit."""
    _, asy = _pair()
    w, pre, dec, cost, router = case
    pre, dec = replace(pre, timer=asy), replace(dec, timer=asy, instances=dec_n)
    got, ref = _both(w, pre, dec, cost, router)
    assert_same_fleet(got, ref)


def test_a_decode_instance_s_first_step_after_idle_is_synchronous() -> None:
    """One request (prompt 8, 3 tokens out): the prefill instance's one step and the decode
    instance's first step (the prompt's last token over the 7 others, transferred) start on idle
    engines; its later decodes hide their host work."""
    sync, asy = _pair()
    pre = replace(trace_pool(64), timer=asy)
    r = simulate_disagg(workload([0.0], [8], [3]), prefill=pre, decode=pre, transfer=COST,
                        router="round-robin", validate=True)
    assert _durations(r.prefill[0]) == pytest.approx(
        [sync.step_time_s(np.array([8]), np.array([0]))], rel=1e-12)
    assert _durations(r.decode[0]) == pytest.approx(
        [sync.step_time_s(I1, np.array([7])), asy.step_time_s(I1, np.array([8])),
         asy.step_time_s(I1, np.array([9]))], rel=1e-12)
