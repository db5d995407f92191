"""The joint search: aggregated and disaggregated candidates in one space and ranking.

Golden figures (Llama-3.1-8B, runpod-secure: H100 $3.99, L40S $1.09 per GPU-hour):
the work bound's hand example; funnel == exhaustive on mixed spaces (H100 and L40S, both
kinds, different GPUs per phase) where disaggregation wins and where it loses; every fleet
the bounds drop misses the SLO when simulated; the lever table's first row is the winner.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import kvplan
from kvplan.analysis.disagg.joint import joint_search
from kvplan.analysis.disagg.joint_levers import disagg_levers, faster_link, variants
from kvplan.analysis.disagg.plan import enumerate_disagg
from kvplan.analysis.disagg.work_bounds import window_miss
from kvplan.analysis.plan.judge import good_needed
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.links import load_link
from kvplan.specs.requests.arrays import Workload
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.slo import PercentileBound, Slo

MODEL = "meta-llama/Llama-3.1-8B"


def _slo(ttft_ms: float, tpot_ms: float) -> Slo:
    return Slo(bounds=(PercentileBound(metric="ttft", percentile=99, limit_ms=ttft_ms),
                       PercentileBound(metric="tpot", percentile=99, limit_ms=tpot_ms)))


def test_good_needed_is_numpy_percentiles_lower_rank() -> None:
    assert good_needed(100, 99) == 99  # floor(99 x 0.99) + 1
    assert good_needed(500, 99) == 495  # floor(499 x 0.99) + 1
    assert good_needed(9, 50) == 5 and good_needed(9, 100) == 9 and good_needed(0, 99) == 0
    rng = np.random.default_rng(0)
    for n, p in ((100, 99), (500, 99), (9, 50), (37, 90), (1, 99)):
        # a percentile <= L needs at least g values <= L: the g-th smallest is <= it
        for v in (np.arange(n, dtype=float), rng.exponential(size=n)):
            g = good_needed(n, p)
            assert np.sort(v)[g - 1] <= np.percentile(v, p)


def test_window_bound_by_hand() -> None:
    """10 requests, one per second, 1,000 prompt tokens each, TTFT p50 <= 1 s. Warm-up skips
    floor(0.1 x 10) = 1: 9 judged (arrivals 1..9 s), g = floor(8 x 0.5) + 1 = 5 must meet
    1 s: 5,000 tokens inside 9 - 1 + 1 = 9 s. 500 tokens/s x 9 s = 4,500 < 5,000: pruned;
    600 tokens/s x 9 s = 5,400: kept."""
    work = Workload(name="hand", arrival_s=np.arange(10, dtype=float),
                    prompt_tokens=np.full(10, 1000), output_tokens=np.full(10, 2))
    slo = Slo(bounds=(PercentileBound(metric="ttft", percentile=50, limit_ms=1000),))
    per = np.full(10, 1000.0)
    why = window_miss(work, slo, "ttft", per, 500.0, "prefill tokens")
    assert "the 5 requests" in why and "5,000 prefill tokens" in why and "9.0 s" in why
    assert window_miss(work, slo, "ttft", per, 600.0, "prefill tokens") == ""
    assert window_miss(work, slo, "e2el", per, 1.0, "x") == ""  # no e2el bound: nothing
    # the decode KV bound's window runs on past the deadline by the longest hold: 1 s more
    # gives 500 x 10 = 5,000, just enough (the bound drops only when the work is larger)
    assert window_miss(work, slo, "ttft", per, 500.0, "x", extra_s=1.0) == ""
    assert window_miss(work, slo, "ttft", per, 499.0, "x", extra_s=1.0) != ""


@functools.cache
def _joint(kind: str, search: str):
    if kind == "long":
        args = WorkloadArgs(num_prompts=200, random_input_len=8000, random_output_len=300,
                            request_rate=4, seed=0)
        slo = _slo(3000, 9)
    elif kind == "heavy":  # prompt tokens at 80,000/s: the work bounds drop small pools
        args = WorkloadArgs(num_prompts=200, random_input_len=8000, random_output_len=50,
                            request_rate=10, seed=0)
        slo = _slo(3000, 50)
    else:
        args = WorkloadArgs(num_prompts=200, random_input_len=200, random_output_len=200,
                            request_rate=10, seed=0)
        slo = _slo(500, 30)
    gpus = ["H100", "L40S"]
    p = kvplan.plan(MODEL, args, slo, gpus=gpus, tensor_parallel_sizes=[1, 2],
                    max_num_batched_tokens=[None], search=search, workers=1)
    work = build_workload(args)
    longest = int(np.max(work.prompt_tokens + work.output_tokens))
    fleets = enumerate_disagg(load_model(MODEL), [load_gpu(g) for g in gpus],
                              EngineConfig(max_model_len=longest), load_link("ib-ndr"),
                              tps=(1, 2), max_instances=2)
    return joint_search(p, fleets, work, slo, p.prices, search=search), work, slo, p


@pytest.mark.parametrize("kind", ["long", "short", "heavy"])
def test_funnel_equals_exhaustive_on_a_mixed_space(kind: str) -> None:
    funnel, exhaustive = _joint(kind, "funnel")[0], _joint(kind, "exhaustive")[0]
    assert funnel.winner is not None and exhaustive.winner is not None
    assert (funnel.winner.id, funnel.winner.kind, funnel.winner.usd_per_hour) == \
        (exhaustive.winner.id, exhaustive.winner.kind, exhaustive.winner.usd_per_hour)
    assert funnel.simulations < exhaustive.simulations
    gpus = {(c.disagg.prefill.gpu.id, c.disagg.decode.gpu.id)
            for c in exhaustive.candidates if c.disagg is not None}
    assert ("L40S", "H100-SXM-80GB") in gpus  # different GPUs per phase are in the space
    # never prune a fleet that could pass: every dropped one misses when simulated
    by_id = {c.id: c for c in exhaustive.candidates}
    for c in funnel.candidates:
        if c.kind == "disaggregated" and c.stage == "pruned_bound":
            assert by_id[c.id].verdict is not None and not by_id[c.id].verdict.ok, c.reason


def test_long_prompts_tight_tpot_disaggregation_wins() -> None:
    """8,000-token prompts, TPOT p99 <= 9 ms: aggregated needs 3 x H100 TP2 ($23.94/h);
    1P1D, one H100 TP1 prefill + one H100 TP2 decode, 3 x $3.99 = $11.97/h, meets it (under
    the 125-point profile, whose per-request step cost was 149 us against the 139-point
    refit's 97 us, it took 1P2D at $19.95/h)."""
    joint, _, _, p = _joint("long", "funnel")
    win = joint.winner
    assert win is not None and win.kind == "disaggregated" and win.disagg is not None
    assert p.winner is not None and p.winner.usd_per_hour == pytest.approx(23.94)
    assert win.usd_per_hour == pytest.approx(11.97) and win.disagg.label == "1P1D"
    assert (win.disagg.prefill.engine.tensor_parallel_size,
            win.disagg.decode.engine.tensor_parallel_size) == (1, 2)
    assert win.verdict is not None and win.verdict.value("p99_tpot_ms") <= 9


def test_short_prompts_disaggregation_loses_the_tie() -> None:
    """200-token prompts at 10 req/s: two L40S GPUs ($2.18/h, 2 x $1.09) meet the SLO;
    the cheapest disaggregated fleets (1P1D on L40S TP1 + TP1) cost the same two GPUs, so the
    tie goes to the aggregated servers, verified first, and no fleet is simulated. (Under the
    125-point profile three L40S TP1 replicas at $3.27 won, and the 1P1D fleet was simulated
    and missed TPOT p99; under the first 141-point refit, with its 8.2 ms per prefill step,
    one L40S TP2 at the same $2.18 won.)"""
    joint = _joint("short", "funnel")[0]
    win = joint.winner
    assert win is not None and win.kind == "aggregated" and win.aggregated is not None
    assert win.usd_per_hour == pytest.approx(2.18)
    d = win.aggregated.deployment
    # two L40S either way, $2.18: TP1 x 2 and TP2 x 1 tie on cost; since equal-cost
    # candidates are simulated too, the larger SLO margin (TP2) wins the tie
    assert (d.gpu.id, d.engine.tensor_parallel_size, d.replicas) == ("L40S", 2, 1)
    dis = [c for c in joint.candidates if c.kind == "disaggregated"]
    cheapest = min(dis, key=lambda c: c.key)
    assert cheapest.usd_per_hour == pytest.approx(2.18) and cheapest.gpus == 2
    assert cheapest.stage == "pruned_cost" and "verified at $2.18/h" in cheapest.reason
    assert {c.stage for c in dis} == {"pruned_cost"} and joint.simulations == 0


def test_lever_baseline_is_the_winner() -> None:
    joint, work, slo, p = _joint("long", "funnel")
    win = joint.best_disagg
    assert win is not None and win.verdict is not None
    rows = disagg_levers(win, work, slo, p.prices)
    key = win.verdict.binding
    assert rows[0].change == "none (the winner)" and rows[0].binding_key == key
    assert rows[0].binding_ms == win.verdict.value(key)
    assert rows[0].usd_per_hour == win.usd_per_hour and rows[0].delta_usd_per_hour == 0
    assert [r.change for r in rows] == ["none (the winner)", "+1 prefill instance",
                                       "+1 decode instance", "--kv-link ib-xdr"]
    one_more = rows[2]  # one more decode instance: an H100 TP2 more, +2 x $3.99
    assert one_more.delta_usd_per_hour == pytest.approx(7.98)


def test_faster_link_keeps_its_scope() -> None:
    assert faster_link(load_link("ib-ndr"), 3).id == "ib-xdr"
    assert faster_link(load_link("eth-100g"), 3).id == "eth-200g"
    assert faster_link(load_link("nvlink4"), 3) is None
    joint = _joint("long", "funnel")[0]
    assert joint.winner is not None and joint.winner.disagg is not None
    assert len(variants(joint.winner.disagg)) == 4


def test_heavy_prompts_pick_different_gpus_per_phase() -> None:
    """8,000-token prompts at 10 req/s, TTFT p99 <= 3 s, TPOT p99 <= 50 ms: 2 H100 TP1
    prefill instances and 2 L40S decode instances (2 x $3.99 + 2 x $1.09 = $10.16/h) beat
    the aggregated 3 x H100 TP1 ($11.97/h: 3 H100s sit at the SLO's edge, p99 TPOT 47.5 ms
    since hunt 16 priced the lm_head at its measured chord, 50.05 ms before, when 13 x L40S
    TP1, $14.17/h, won; 14 x L40S, $15.26/h, under the profile fitted with the three
    faster-than-physics TTFTs),
    as Splitwise proposes. The work bound drops the fleets whose prefill pool is too slow:
    200 requests, warm-up 20, 180 judged, g = floor(179 x 0.99) + 1 = 178 must meet 3 s:
    178 x 8,000 = 1,424,000 prompt tokens."""
    joint, _, _, p = _joint("heavy", "funnel")
    win = joint.winner
    assert win is not None and win.disagg is not None and win.disagg.label == "2P2D"
    assert (win.disagg.prefill.gpu.id, win.disagg.decode.gpu.id) == ("H100-SXM-80GB", "L40S")
    assert win.usd_per_hour == pytest.approx(10.16)
    assert p.winner is not None and p.winner.usd_per_hour == pytest.approx(11.97)
    bound = [c.reason for c in joint.candidates if "prefill tokens" in c.reason]
    assert bound and all("the 178 requests" in r and "1,424,000 prefill tokens" in r
                         for r in bound)
