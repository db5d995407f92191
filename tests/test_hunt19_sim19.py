"""Hunt 19 (sim19): the serving simulator against vLLM 0.11.0's v1 scheduler, exact step
traces by hand (vllm/v1/core/sched/scheduler.py, engine/arg_utils.py)."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.sim.scheduler import Limits, default_limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, PipeTimer, workload
from kvplan.specs.serving import EngineConfig


def test_an_unset_max_num_seqs_is_capped_at_the_token_budget_as_vllm_defaults_it():
    # vLLM 0.11 EngineArgs._set_default_args: max_num_seqs = min(default, max_num_batched_
    # tokens) when --max-num-seqs is not given (256 on an unknown GPU, budget 4 -> 4).
    assert default_limits(EngineConfig(max_num_batched_tokens=4)).max_num_seqs == 4
    assert default_limits(EngineConfig(max_num_batched_tokens=128),
                          80 * 1024**3).max_num_seqs == 128
    assert default_limits(EngineConfig(max_num_batched_tokens=4, max_num_seqs=2)
                          ).max_num_seqs == 2
    # Where it shows: pp = 2 batches in flight. Eight 1-token prompts, 3 outputs each, at 0;
    # a batch alone takes stage + (pp - 1) x stage = 2 s. Batch 0 at 0 s: A-D (4 tokens, the
    # budget), back at 2; the next batch at 0 s is empty (A-D in flight, running = 4 =
    # max_num_seqs, so E-H wait). A-D decode at 2 -> 4 and 4 -> 6 (finish at 6), then E-H
    # run 6 -> 12. Before: max_num_seqs 256, E-H joined at 0 s beside A-D in flight
    # (8 running, E-H finished at 7).
    w = workload([0.0] * 8, [1] * 8, [3] * 8)
    r = simulate(w, timer=PipeTimer(pp=2), num_blocks=100, block_size=16,
                 engine=EngineConfig(max_num_batched_tokens=4))
    assert r.steps.running.tolist() == [4] * 6
    assert r.steps.new_tokens.tolist() == [4] * 6
    assert r.finish_s.tolist() == [6.0] * 4 + [12.0] * 4


@pytest.mark.parametrize("kwargs", [
    dict(limits=Limits(max_num_batched_tokens=4, max_num_seqs=2), block_size=-16),
    dict(limits_args=dict(max_num_batched_tokens=0, max_num_seqs=1)),
    dict(limits_args=dict(max_num_batched_tokens=4, max_num_seqs=0)),
    dict(limits_args=dict(max_num_batched_tokens=-3, max_num_seqs=2)),
    dict(limits_args=dict(max_num_batched_tokens=4, max_num_seqs=2,
                          long_prefill_token_threshold=-1)),
])
def test_simulate_refuses_budgets_and_block_sizes_vllm_cannot_run(kwargs, monkeypatch):
    # Before: a zero budget or zero max_num_seqs ran into "AssertionError: scheduler made no
    # progress" (the core: "tokens outside the tables" / "bad limits"), block_size -16 an
    # IndexError, and a negative threshold ran as no cap; now one InputError naming it.
    monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    w = workload([0.0, 0.0], [5, 5], [2, 2])
    with pytest.raises(InputError, match=r"must be a whole number in \["):
        lim = kwargs.get("limits") or Limits(**kwargs["limits_args"])
        simulate(w, timer=LinearTimer(), num_blocks=20, block_size=kwargs.get("block_size", 4),
                 limits=lim)


@pytest.mark.parametrize("path", ["core", "python"])
@pytest.mark.parametrize("arrivals", [[0.0, float("nan"), 1.0], [0.0, -1.0, 1.0],
                                      [0.0, float("inf"), 1.0]])
def test_simulate_refuses_arrivals_that_are_not_finite_seconds(path, arrivals, monkeypatch):
    # Before: a NaN arrival never came and the run never ended (a hang); inf left the
    # requests after it unserved, silently; -1 s ran. specs.requests.Workload refuses them,
    # and now so do simulate's duck-typed workloads (simulate_dp and simulate_disagg too).
    if path == "python":
        monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    w = workload(arrivals, [4, 4, 4], [2, 2, 2])
    with pytest.raises(InputError, match="finite seconds >= 0"):
        simulate(w, timer=LinearTimer(), num_blocks=20, block_size=4,
                 limits=Limits(max_num_batched_tokens=8, max_num_seqs=4))


@pytest.mark.parametrize(("path", "fast"), [("core", True), ("python", True),
                                            ("python", False)])
def test_an_open_loop_releases_requests_in_arrival_order_whatever_the_list_order(
        path, fast, monkeypatch):
    # Arrivals [5, 0, 2], 4-token prompts, 2 outputs, 1 s steps, budget 8: the request sent
    # at 0 s prefills in [0, 1], decodes in [1, 2] (finish 2); the one at 2 s runs [2, 4], the
    # one at 5 s [5, 7]. Before, a timer without an API path released them in list order:
    # the request sent at 0 s waited for the one at 5 s (scheduled 5 s, finish 7 s); with an
    # API path (and simulate_dp, simulate_disagg) they were already in arrival order.
    if path == "python":
        monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    w = workload([5.0, 0.0, 2.0], [4, 4, 4], [2, 2, 2])
    r = simulate(w, timer=LinearTimer(), num_blocks=20, block_size=4,
                 limits=Limits(max_num_batched_tokens=8, max_num_seqs=4), fast=fast)
    assert r.scheduled_s.tolist() == [5.0, 0.0, 2.0]
    assert r.finish_s.tolist() == [7.0, 2.0, 4.0]
    closed = workload([5.0, 0.0, 2.0], [4, 4, 4], [2, 2, 2], concurrency=2)
    with pytest.raises(InputError, match=r"closed loop .* sorted ascending"):
        simulate(closed, timer=LinearTimer(), num_blocks=20, block_size=4,
                 limits=Limits(max_num_batched_tokens=8, max_num_seqs=4), fast=fast)


@pytest.mark.parametrize("path", ["core", "python"])
def test_simulate_refuses_a_fractional_block_count(path, monkeypatch):
    # Before: num_blocks=20.5 ran on the Python loop with 19.5 usable blocks and raised
    # "TypeError: 'float' object cannot be interpreted as an integer" in the core.
    if path == "python":
        monkeypatch.setenv("KVPLAN_SIM_CORE", "python")
    w = workload([0.0, 1.0], [4, 4], [2, 2])
    with pytest.raises(InputError, match="num_blocks must be a whole number of KV blocks"):
        simulate(w, timer=LinearTimer(), num_blocks=20.5, block_size=4,  # type: ignore[arg-type]
                 limits=Limits(max_num_batched_tokens=8, max_num_seqs=4))


def test_max_num_seqs_above_the_gpus_default_token_budget_is_refused_as_vllm_does():
    # vLLM 0.11: _set_default_args fills an unset --max-num-batched-tokens with the GPU
    # class's default (H100: 8,192; A100: 2,048) before SchedulerConfig._verify_args refuses
    # max_num_batched_tokens < max_num_seqs. Before: simulate ran 8,192 tokens / 10,000 seqs.
    from tests.conftest import assert_one_line_error, run_cli

    for gpu, seqs, budget in (("H100", "10000", "8192"), ("A100-80GB", "3000", "2048")):
        r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", gpu, "--max-num-seqs",
                    seqs, "--num-prompts", "2")
        assert_one_line_error(r)
        assert (f"the GPU's default --max-num-batched-tokens {budget} is below "
                f"--max-num-seqs {seqs}") in r.err
    ok = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-num-seqs",
                 "8192", "--num-prompts", "2", "--json")  # 8,192 >= 8,192: vLLM starts
    assert ok.code == 0, ok.err


def test_a_request_whose_tokens_are_in_flight_keeps_its_sliding_window_blocks():
    # vLLM 0.11 schedule(): a running request with num_new_tokens == 0 (pp: its last tokens
    # are in flight, num_computed_tokens already advanced) is skipped ("continue") before
    # allocate_slots, so remove_skipped_blocks does not trim its window until it is
    # scheduled again. Block size 1, one sliding group of window 4, pp = 2 (a batch alone
    # 2 s), budget 8; A and B (8-token prompts, 3 outputs) at 0 s:
    #   batch 0 at 0 s: A 8 tokens -> A holds 8 blocks                        used 8
    #   batch 1 at 0 s: A in flight (skipped, keeps 8); B 8 tokens -> 8        used 16
    #   batch 2 at 2 s: A decodes: computed 8 frees (8 - 4 + 1) // 1 = 5, takes 1 -> 4;
    #                   B in flight keeps 8                                   used 12
    #   batches 3-5 (3, 4, 5 s): one decodes (4), the other in flight (4)     used 8
    # Before: an in-flight request went through the block arithmetic with new = 0 and gave
    # its out-of-window blocks back a batch early: used 8, 11, 7, 7, 7, 7.
    from kvplan.sim.blocks import CacheGroup, KvShape

    shape = KvShape(block_size=1, groups=(CacheGroup(kind="sliding", window=4),))
    r = simulate(workload([0.0, 0.0], [8, 8], [3, 3]), timer=PipeTimer(pp=2), num_blocks=100,
                 block_size=1, kv=shape, limits=Limits(max_num_batched_tokens=8, max_num_seqs=4),
                 validate=True)
    assert r.steps.used_blocks.tolist() == [8, 16, 12, 8, 8, 8]
    assert r.steps.new_tokens.tolist() == [8, 8, 1, 1, 1, 1]
    assert r.steps.start_s.tolist() == [0.0, 0.0, 2.0, 3.0, 4.0, 5.0]
    assert r.finish_s.tolist() == [6.0, 7.0]
