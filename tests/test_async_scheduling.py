"""vLLM --async-scheduling (EngineConfig.async_scheduling): the engine schedules and prepares
step n + 1 while the GPU runs step n, so the host's per-step and per-request work overlaps the
GPU's (StepCostModel._finish): step = max(stage, step_overhead + request_s x R) + what a
prefill step adds. Hand-checked against the synchronous step, every pricing path agreeing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kvplan.costs.step.profile import Profile
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

MODEL = "meta-llama/Llama-3.1-8B"
PROF = Profile(step_overhead_s=1e-3, prefill_overhead_s=4e-3, request_overhead_s=50e-6)


def _pair(prof: Profile = PROF) -> tuple[StepCostModel, StepCostModel]:
    model, gpu = load_model(MODEL), load_gpu("H100")
    return (StepCostModel(model, gpu, EngineConfig(), prof),
            StepCostModel(model, gpu, EngineConfig(async_scheduling=True), prof))


def test_host_work_hidden_behind_a_longer_gpu_stage():
    sync, asy = _pair()
    new, ctx = np.ones(64, dtype=np.int64), np.full(64, 1000, dtype=np.int64)
    host = 1e-3 + 50e-6 * 64  # 4.2 ms of host work for 64 decodes
    stage = sync.step_time_s(new, ctx) - host
    assert stage > host  # 8B on H100 at 64 x 1,000 tokens: the GPU's part is the longer
    assert asy.step_time_s(new, ctx) == pytest.approx(stage, rel=1e-12)


def test_host_bound_step_costs_the_host_work():
    sync, asy = _pair(replace(PROF, request_overhead_s=400e-6))
    new, ctx = np.ones(64, dtype=np.int64), np.full(64, 100, dtype=np.int64)
    host = 1e-3 + 400e-6 * 64  # 26.6 ms: longer than the GPU's decode of 64 short requests
    stage = sync.step_time_s(new, ctx) - host
    assert stage < host
    assert asy.step_time_s(new, ctx) == pytest.approx(host, rel=1e-12)


def test_a_prefill_step_still_pays_its_prefill_overhead():
    sync, asy = _pair()
    new, ctx = np.array([512]), np.array([0])
    stage = sync.step_time_s(new, ctx) - (1e-3 + 4e-3 + 50e-6)
    assert asy.step_time_s(new, ctx) == pytest.approx(max(stage, 1e-3 + 50e-6) + 4e-3,
                                                       rel=1e-12)


def test_every_pricing_path_agrees_under_async_scheduling():
    _, asy = _pair()
    ctx = np.array([5, 300, 2048], dtype=np.int64)
    run = asy.decode_run_s(ctx, 4)
    steps = [asy.step_time_s(np.ones(3, dtype=np.int64), ctx + k) for k in range(4)]
    assert run.tolist() == steps
    agg = asy.step_time_agg(3, 3, int(ctx.sum()), int(ctx.sum()) + 3, False)
    assert agg == steps[0]
    recorded = asy.times_s(asy.aggregates(np.ones(3, dtype=np.int64), ctx))
    assert float(np.asarray(recorded).reshape(-1)[0]) == steps[0]
    assert asy.with_profile(PROF).step_time_s(np.ones(3, dtype=np.int64), ctx) == steps[0]


def test_async_timers_run_in_the_compiled_form_with_their_overlap():
    """They took the Python loops (the form had no overlap); the form now carries it."""
    sync, asy = _pair()
    f_sync, f_async = sync.aggregate_form(64), asy.aggregate_form(64)
    assert f_sync is not None and not f_sync.overlap_host
    assert f_async is not None and f_async.overlap_host


def test_async_is_never_slower_than_sync():
    sync, asy = _pair()
    for n, c in (([1] * 8, [10] * 8), ([256], [0]), ([1] * 200, [4000] * 200)):
        new, ctx = np.array(n, dtype=np.int64), np.array(c, dtype=np.int64)
        assert asy.step_time_s(new, ctx) <= sync.step_time_s(new, ctx)
