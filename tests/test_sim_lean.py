"""The lean step's contract: timers priced from sums equal their array forms to the bit, the
lean path really runs, and without it (a timer with no sums) the fast path equals it too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from kvplan.costs.step.roofline import StepCostModel, has_prefill
from kvplan.sim import core
from kvplan.sim import simulator as sim_mod
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, poisson_workload
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.core_helpers import assert_same, python_loop
from tests.test_sim_properties import TIMER, cases

MODELS = ["meta-llama/Llama-2-7b-hf", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V2-Lite",
          "google/gemma-2-9b-it"]


def _sums(new: np.ndarray, ctx: np.ndarray) -> tuple[int, int, int, int, bool]:
    pairs = int((new * ctx).sum() + (new * (new + 1)).sum() // 2)
    return int(new.sum()), len(new), int(ctx.sum()), pairs, has_prefill(new, ctx)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("tp", [1, 2])
def test_step_time_from_sums_equals_step_time(model: str, tp: int) -> None:
    t = StepCostModel(load_model(model), load_gpu("H100"), EngineConfig(tensor_parallel_size=tp))
    if not t.supports_aggregates:  # sliding windows and MLA's prefill path need per-request
        assert model in ("google/gemma-2-9b-it", "deepseek-ai/DeepSeek-V2-Lite")  # sums
        return
    rng = np.random.default_rng(1)
    for size in (1, 3, 48, 49, 300):  # both sides of the small-batch Python path
        for _ in range(20):
            new = rng.integers(1, 3, size) * rng.integers(1, 600, size) ** rng.integers(0, 2, size)
            ctx = rng.integers(0, 5000, size)
            assert t.step_time_agg(*_sums(new, ctx)) == t.step_time_s(new, ctx)
        ctx = rng.integers(1, 5000, size)
        assert np.array_equal(t.decode_run_agg(size, int(ctx.sum()), 30), t.decode_run_s(ctx, 30))


class _NoSums:
    """TIMER without its sum-priced methods: the simulator takes the array fast path."""

    step_time_s = TIMER.step_time_s
    decode_run_s = TIMER.decode_run_s


@settings(max_examples=120, deadline=None)
@given(cases())
def test_array_fast_path_equals_lean_path(case):
    w, cfg = case
    with python_loop():
        lean = simulate(w, timer=TIMER, validate=True, **cfg)
    assert_same(simulate(w, timer=TIMER, validate=True, **cfg), lean)  # the core, where it fits
    arrays = simulate(w, timer=_NoSums(), validate=True, **cfg)
    for name in ("first_token_s", "finish_s", "preemptions", "prefix_hit_tokens"):
        assert np.array_equal(getattr(lean, name), getattr(arrays, name), equal_nan=True), name
    for name in ("end_s", "used_blocks", "logical_bytes", "running", "waiting", "new_tokens"):
        assert np.array_equal(getattr(lean.steps, name), getattr(arrays.steps, name)), name
    # every lookup counted (vLLM 0.11.0's PrefixCacheStats), a preempted head's too
    assert (lean.prefix_query_tokens, lean.prefix_lookup_hits) == (
        arrays.prefix_query_tokens, arrays.prefix_lookup_hits)


def test_lean_steps_and_runs_carry_a_loaded_server(monkeypatch):
    monkeypatch.setenv(core.ENV, "python")  # the pure-Python loop's lean path, not the core
    calls = {"lean": 0, "ahead": 0, "general": 0}
    for name, key in (("_lean_step", "lean"), ("_lean_run_ahead", "ahead"),
                      ("_general_step", "general")):
        orig = getattr(sim_mod._Loop, name)

        def wrap(self, *a, _o=orig, _k=key):
            before = self.s.step
            out = _o(self, *a)
            calls[_k] += self.s.step - before  # engine steps this call ran
            return out
        monkeypatch.setattr(sim_mod._Loop, name, wrap)
    from kvplan.sim.scheduler import Limits
    # bursts of arrivals with long quiet decode stretches between them
    w = poisson_workload(300, rate=3.0, prompt=(50, 400), output=(40, 200), seed=2)
    r = simulate(w, timer=LinearTimer(base_s=0.01, per_token_s=1e-5), num_blocks=4000,
                 block_size=16, limits=Limits(max_num_batched_tokens=256, max_num_seqs=32))
    assert r.finished.all()
    assert calls["general"] == 0  # every step ran on the cohort: one by one or in runs
    assert calls["lean"] + calls["ahead"] == r.num_steps
    assert calls["lean"] > 1000 and calls["ahead"] > 1000


@pytest.mark.parametrize("loop", ["core", "python"])
def test_progress_is_called_every_4096_steps_even_when_turns_hold_many(loop, monkeypatch):
    if loop == "python":
        monkeypatch.setenv(core.ENV, "python")
    from kvplan.sim.scheduler import Limits

    seen: list[int] = []
    # 40 long decodes ending one by one: ~20,000 steps in well under 4096 turns (runs from
    # one finish to the next), so a per-turn count alone would report only at the end
    w = poisson_workload(40, rate=1000.0, prompt=(10, 20), output=(1000, 20000), seed=1)
    r = simulate(w, timer=LinearTimer(base_s=0.01), num_blocks=60000, block_size=16,
                 limits=Limits(max_num_batched_tokens=256, max_num_seqs=64),
                 progress=lambda done, total: seen.append(done))
    assert r.num_steps > 4 * 4096 and len(seen) >= 4
    assert seen[-1] == 40 and seen == sorted(seen)
