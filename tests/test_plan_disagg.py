"""The disaggregated grid, the screen's drops, its floors (never above what the simulation
gives) and each role's serve lines."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.disagg.floors import floor_latencies
from kvplan.analysis.disagg.plan import enumerate_disagg, serve_lines
from kvplan.analysis.disagg.screen import screen_fleets
from kvplan.analysis.disagg.serving import plan_pool, simulate_disagg_serving
from kvplan.analysis.plan.judge import latencies
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.links import load_link
from kvplan.specs.prices import price_table
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.slo import PercentileBound, Slo

MODEL = load_model("meta-llama/Llama-3.1-8B")
ENGINE = EngineConfig(max_model_len=8192)
WORK = build_workload(WorkloadArgs(num_prompts=60, random_input_len=2048,
                                   random_output_len=32, request_rate=6, seed=1))


def _slo(ttft_ms: float, tpot_ms: float) -> Slo:
    return Slo(bounds=(PercentileBound(metric="ttft", percentile=99, limit_ms=ttft_ms),
                       PercentileBound(metric="tpot", percentile=99, limit_ms=tpot_ms)))


def _fleets(gpus=("H100",), tps=(1, 2), n=2):
    return enumerate_disagg(MODEL, [load_gpu(g) for g in gpus], ENGINE, load_link("ib-ndr"),
                            tps=tps, max_instances=n)


def test_grid_keeps_nixl_tp_pairs() -> None:
    fleets = _fleets()
    pairs = {(d.prefill.engine.tensor_parallel_size, d.decode.engine.tensor_parallel_size)
             for d in fleets}
    assert pairs == {(1, 1), (1, 2), (2, 2)}  # (2, 1): decode TP below prefill TP
    assert len(fleets) == 3 * 4  # x, y in {1, 2}


def test_floors_never_exceed_the_simulation() -> None:
    dd = _fleets(n=1)[0]
    run = simulate_disagg_serving(dd, WORK)
    sim = latencies(run.result.client)
    low = floor_latencies(dd, plan_pool("prefill", dd.prefill), plan_pool("decode", dd.decode),
                          WORK)
    assert (low.ttft_ms <= sim.ttft_ms + 1e-9).all()
    keep = ~np.isnan(low.tpot_ms)
    assert (low.tpot_ms[keep] <= sim.tpot_ms[keep] + 1e-9).all()


def test_impossible_ttft_drops_every_fleet_at_the_floor() -> None:
    got = screen_fleets(_fleets(), WORK, _slo(1.0, 100.0), price_table())
    assert got.kept == ()
    assert {c.stage for c in got.dropped} == {"pruned_bound"}
    assert all("p99_ttft_ms" in c.reason and "at zero load" in c.reason for c in got.dropped)


def test_memory_drop_names_the_pool() -> None:
    fleets = enumerate_disagg(MODEL, [load_gpu("L4")], EngineConfig(), load_link("ib-ndr"),
                              tps=(1,), max_instances=1)
    got = screen_fleets(fleets, WORK, _slo(5000.0, 100.0), price_table())
    (c,) = got.dropped
    assert c.stage == "pruned_memory"
    assert c.reason == "the prefill pool (L4 TP1) cannot hold one max_model_len request"


def test_loose_slo_keeps_fleets_and_the_serve_lines() -> None:
    got = screen_fleets(_fleets(), WORK, _slo(5000.0, 100.0), price_table())
    assert got.kept and all(c.reason == "kept for simulation" for c in got.kept)
    lines = serve_lines(got.kept[0].disagg)
    assert "NixlConnector" in lines["prefill"] and "NixlConnector" in lines["decode"]
    assert "--no-enable-prefix-caching" in lines["decode"]
    assert lines["prefill"].startswith("1 x: vllm serve")


QWEN = load_model("Qwen/Qwen3-30B-A3B")
"""An MoE model: 128 experts, moe_intermediate_size 768."""


def test_pool_layouts_of_an_moe_model() -> None:
    """DP 1, 2, 4, 8 x TP 1, 2, 4, 8 within one 8-GPU node (dp x tp <= 8): 4 + 3 + 2 + 1
    layouts, EP on at dp > 1 (the default entry), off at dp 1; a dense model: TP only."""
    from kvplan.analysis.disagg.plan import pool_layouts
    from kvplan.analysis.plan.parallel.space import DEFAULT_DP

    h100 = load_gpu("H100")
    assert pool_layouts(QWEN, h100, (1, 2, 4, 8), DEFAULT_DP) == [
        (1, 1, False), (2, 1, False), (4, 1, False), (8, 1, False), (1, 2, True),
        (2, 2, True), (4, 2, True), (1, 4, True), (2, 4, True), (1, 8, True)]
    assert pool_layouts(QWEN, h100, (2,), (1, 2), (True, False)) == [
        (2, 1, True), (2, 1, False), (2, 2, True), (2, 2, False)]
    assert pool_layouts(MODEL, h100, (1, 2, 4, 8), DEFAULT_DP) == [
        (1, 1, False), (2, 1, False), (4, 1, False), (8, 1, False)]


def test_moe_grid_pairs_dp_ep_pools() -> None:
    """One GPU: of the 10 x 10 layout pairs, 65 have the decode TP a multiple of the prefill
    TP (prefill TP1: 4 layouts x 10; TP2: 3 x 6; TP4: 2 x 3; TP8: 1 x 1); vLLM's
    NixlConnector refuses 7 of them, a decode TP8 above Qwen3-30B-A3B's 4 KV heads with a
    prefill TP below them (TP1: 4 layouts, TP2: 3, each x the one TP8 layout): 58 x 16."""
    from kvplan.analysis.plan.parallel.space import DEFAULT_DP

    fleets = enumerate_disagg(QWEN, [load_gpu("H100")], ENGINE, load_link("ib-ndr"),
                              tps=(1, 2, 4, 8), max_instances=4, dps=DEFAULT_DP)
    assert len(fleets) == 58 * 16
    wide = [d for d in fleets if d.decode.engine.data_parallel_size == 8]
    assert len(wide) == 4 * 16  # decode DP8 x TP1 EP behind each TP1 prefill layout
    assert all(d.decode.engine.enable_expert_parallel for d in wide)
    assert wide[0].decode.gpus_per_replica == 8


def test_dp_pool_memory_drop_names_its_layout() -> None:
    """Qwen3-30B-A3B's 57 GiB of weights do not fit an L4 at TP1, nor at DP2 x TP1 EP (half
    the experts per GPU is still over 24 GB): each drop names the pool's layout."""
    fleets = enumerate_disagg(QWEN, [load_gpu("L4")], EngineConfig(), load_link("ib-ndr"),
                              tps=(1,), max_instances=1, dps=(1, 2))
    got = screen_fleets(fleets, WORK, _slo(5000.0, 100.0), price_table())
    assert {c.reason for c in got.dropped} == {
        "the prefill pool (L4 TP1) cannot hold one max_model_len request",
        "the prefill pool (L4 DP2 x TP1 EP) cannot hold one max_model_len request"}
