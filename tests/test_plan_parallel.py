"""DP / EP pools in the planner's space: enumeration rules, pricing, bounds, lockstep
verification, the serve line and levers, and the one-line refusals (docs/planner.md,
*Data and expert parallelism*)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.analysis.plan.bounds import bounds
from kvplan.analysis.plan.fleet import Replica, simulate_fleet
from kvplan.analysis.plan.planner import plan
from kvplan.analysis.plan.space import SearchSpace, enumerate_space
from kvplan.analysis.serving import simulate_deployment
from kvplan.errors import InputError
from kvplan.report.plan.plan_json import plan_json
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli
from tests.plan_helpers import FAST, poisson_workload, slo

MOE = "Qwen/Qwen3-30B-A3B"
H200 = "H200-SXM-141GB"
PRICE = (f"{H200}=4",)
"""$4 per GPU-hour: a DP2 replica costs 2 x 4 = $8/h, hand-checkable."""
SLO = slo("ttft:p99:2000", "tpot:p99:100")
TIGHT = slo("ttft:p99:2000", "tpot:p99:3")


def _work(n: int = 160, rate: float = 8.0):  # type: ignore[no-untyped-def]
    return poisson_workload(n, rate, prompt=512, output=48, seed=3)


def _layouts(model: str, tps: tuple[int, ...], **kw: object) -> list[tuple[int, int, bool]]:
    m, g = load_model(model), load_gpu("H200")
    space = SearchSpace(gpus=(g,), tensor_parallel_sizes=tps, max_model_len=4096, **kw)  # type: ignore[arg-type]
    out = []
    for d, why, flags in enumerate_space(m, space, "round-robin"):
        assert d is not None, why
        e = d.engine
        assert (flags["data_parallel_size"], flags["enable_expert_parallel"]) == (
            e.data_parallel_size, e.enable_expert_parallel)
        out.append((e.tensor_parallel_size, e.data_parallel_size, e.enable_expert_parallel))
    return out


def test_default_moe_space_holds_dp_ep_within_one_node() -> None:
    """TP 1, 2, 4, 8 x DP 1, 2, 4, 8 within 8 GPUs, each dp > 1 with EP and without:
    7 + 5 + 3 + 1 = 16 layouts; dp 1 is the TP-only space (EP off)."""
    got = _layouts(MOE, (1, 2, 4, 8), data_parallel_sizes=(1, 2, 4, 8), default_dp=True)
    assert got == [(1, 1, False), (1, 2, True), (1, 2, False), (1, 4, True), (1, 4, False),
                   (1, 8, True), (1, 8, False),
                   (2, 1, False), (2, 2, True), (2, 2, False), (2, 4, True), (2, 4, False),
                   (4, 1, False), (4, 2, True), (4, 2, False), (8, 1, False)]


def test_given_dp_list_is_enumerated_whole_and_ep_lists_multiply() -> None:
    """A DP list the user gives is not cut to a node (H200 has a scale-out link); an
    --enable-expert-parallel list multiplies the space."""
    got = _layouts(MOE, (8,), data_parallel_sizes=(1, 2), expert_parallel=(False, True))
    assert got == [(8, 1, False), (8, 1, True), (8, 2, False), (8, 2, True)]


def test_dense_default_space_is_unchanged() -> None:
    """A dense model keeps DP 1 and no EP: the same candidates in the same order."""
    got = _layouts("meta-llama/Llama-3.1-8B", (1, 2, 4, 8))
    assert got == [(1, 1, False), (2, 1, False), (4, 1, False), (8, 1, False)]


@settings(max_examples=25, deadline=None)
@given(tps=st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4, unique=True),
       dps=st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=5, unique=True))
def test_default_dp_rule_property(tps: list[int], dps: list[int]) -> None:
    """Every default-space layout fits one node, each dp > 1 comes with EP and without, EP
    is off at dp 1, every dp = 1 layout is kept (the TP-only space is always a subset), and
    no layout repeats."""
    got = _layouts(MOE, tuple(tps), data_parallel_sizes=tuple(dps), default_dp=True)
    for tp, dp, ep in got:
        assert dp == 1 or tp * dp <= 8
        assert not ep or dp > 1
        if dp > 1:
            assert (tp, dp, not ep) in got
    assert len(set(got)) == len(got)
    if 1 in dps:
        assert {tp for tp, dp, _ in got if dp == 1} == set(tps)
    expected = sum(1 if dp == 1 else 2 for tp in tps for dp in dps if dp == 1 or tp * dp <= 8)
    assert len(got) == expected


def test_dp_ceilings_are_one_ranks_times_dp() -> None:
    """Each optimistic ceiling of a DP group is its rank's (the same DP timer, one pool,
    one scheduler) x dp; the zero-load latencies are one rank's."""
    m, g = load_model(MOE), load_gpu("H200")
    d = Deployment(model=m, gpu=g, engine=EngineConfig(
        data_parallel_size=4, enable_expert_parallel=True, max_model_len=4096))
    rep = Replica(d)
    work = _work()
    b4 = bounds(rep, work, SLO)
    rep.ranks = 1  # the same rank, priced alone
    b1 = bounds(rep, work, SLO)
    for (k4, v4), (k1, v1) in zip(b4.ceilings_rps, b1.ceilings_rps, strict=True):
        assert k4 == k1 and v4 == pytest.approx(4 * v1, rel=1e-12)
    assert b4.zero_load.achieved == b1.zero_load.achieved


def test_planner_replica_runs_the_same_lockstep_fleet_as_simulate() -> None:
    """A DP replica's share is replayed by the lockstep DP simulation: one replica of the
    planner's fleet gives exactly `kvplan simulate -dp 2 --enable-expert-parallel`'s times."""
    m, g = load_model(MOE), load_gpu("H200")
    e = EngineConfig(data_parallel_size=2, enable_expert_parallel=True, max_model_len=4096)
    work = _work(80)
    run = simulate_fleet(Replica(Deployment(model=m, gpu=g, engine=e)), work, 1, SLO)
    ref = simulate_deployment(Deployment(model=m, gpu=g, engine=e), work)
    assert ref.dp is not None
    r = ref.result
    ttft = (r.first_token_s - r.arrival_s) * 1000
    np.testing.assert_array_equal(run.latencies.ttft_ms, ttft)
    assert run.output_tokens == int(r.output_tokens[r.finished].sum())


def _plan(slo_=SLO, **kw: object):  # type: ignore[no-untyped-def]
    opts = {"gpus": [H200], "tensor_parallel_sizes": (1,), "max_num_batched_tokens": (None,),
            "price_overrides": PRICE, **FAST, **kw}
    return plan(MOE, _work(), slo_, **opts)


def test_moe_plan_enumerates_and_prices_dp_ep_candidates() -> None:
    """Default space at TP1 on one GPU type: DP 1, 2, 4, 8 (dp > 1 with EP and without),
    each priced as replicas x dp GPUs x $4."""
    p = _plan(explain=False)
    lay = [(c.deployment.engine.data_parallel_size, c.deployment.engine.enable_expert_parallel)
           for c in p.candidates]
    assert lay == [(1, False), (2, True), (2, False), (4, True), (4, False), (8, True),
                   (8, False)]
    for c in p.candidates:
        dp = c.deployment.engine.data_parallel_size
        assert c.deployment.gpus_per_replica == dp
        assert c.optimistic_usd_per_hour == pytest.approx(4.0 * dp * c.optimistic_replicas)
        if c.usd_per_hour is not None:
            assert c.usd_per_hour == pytest.approx(4.0 * dp * (c.replicas or 0))
    doc = plan_json(p)
    keys = [(c["data_parallel_size"], c["enable_expert_parallel"]) for c in doc["candidates"]]
    assert keys == lay
    # DP8 + EP: 1,201,584 tokens per rank (docs/parallelism.md, worked example)
    assert p.candidates[5].kv_cache_tokens == 1_201_584


def test_dp_winner_serve_line_record_and_levers() -> None:
    """A space of DP2 + EP only: the winner is verified on the lockstep fleet, its serve line
    carries --data-parallel-size 2 --enable-expert-parallel, and the lever table says what
    the layout bought against TP2 on the same GPUs and DP4."""
    p = _plan(data_parallel_sizes=(2,), expert_parallel=(True,))
    w = p.winner
    assert w is not None and w.stage == "verified" and w.fleet is not None
    assert " --data-parallel-size 2 --enable-expert-parallel " in p.serve_command + " "
    assert "--tensor-parallel-size 1 " in p.serve_command
    assert w.usd_per_hour == pytest.approx(8.0 * (w.replicas or 0))
    changes = [lv.change for lv in p.levers]
    assert "--data-parallel-size 1 --tensor-parallel-size 2" in changes
    assert "without --enable-expert-parallel" in changes
    assert "--data-parallel-size 4 --enable-expert-parallel" in changes
    tp2 = next(lv for lv in p.levers if lv.change.startswith("--data-parallel-size 1"))
    assert tp2.verified and tp2.usd_per_hour is not None
    assert tp2.usd_per_hour == pytest.approx(8.0 * (tp2.replicas or 0))


@pytest.mark.parametrize(("model", "kw", "says"), [
    (MOE, {"data_parallel_sizes": (256,), "expert_parallel": (True,)},
     "exceeds the 128 experts"),
    ("meta-llama/Llama-3.1-8B", {"data_parallel_sizes": (2,)}, "is dense"),
    ("meta-llama/Llama-3.1-8B", {"expert_parallel": (True,)}, "has no experts"),
    (MOE, {"data_parallel_sizes": (0,)}, "positive whole number"),
])
def test_bad_dp_ep_lists_are_refused_in_one_line(model: str, kw: dict[str, object],
                                                  says: str) -> None:
    with pytest.raises(InputError) as exc:
        plan(model, _work(), SLO, gpus=[H200], tensor_parallel_sizes=(1,),
             price_overrides=PRICE, **FAST, **kw)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_cli_dp_flags_and_one_line_refusals() -> None:
    """`kvplan plan -dp 2 --enable-expert-parallel on --json`: the winner's serve line;
    a DP degree wider than the experts, DP on a dense model, or a bad on/off: exit 2."""
    base = ("plan", MOE, "--gpu", H200, "-tp", "1", "--price", PRICE[0], "--num-prompts",
            "120", "--random-input-len", "512", "--random-output-len", "48",
            "--request-rate", "6", "--sample-requests", "80", "--workers", "1",
            "--max-num-batched-tokens", "default", "--slo", "ttft:p99:2000", "tpot:p99:100")
    r = run_cli(*base, "-dp", "2", "--enable-expert-parallel", "on", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert "--data-parallel-size 2 --enable-expert-parallel" in doc["summary"]["vllm_serve"]
    assert [c["data_parallel_size"] for c in doc["candidates"]] == [2]
    for extra in (("-dp", "256", "--enable-expert-parallel", "on"), ("-dp", "2,x"),
                  ("--enable-expert-parallel", "maybe")):
        assert_one_line_error(run_cli(*base, *extra))
    dense = run_cli("plan", "meta-llama/Llama-3.1-8B", *base[2:], "-dp", "2")
    assert_one_line_error(dense)
    assert "is dense" in dense.err


def test_an_ep_degree_wider_than_the_experts_at_one_tp_is_that_candidates_invalid_record(
        ) -> None:
    """DP32 + EP: at TP1 ep = 32 <= 128 experts (a candidate, here one no instance shape
    holds); at TP8 ep = 256 > 128: its record is ``invalid`` with vLLM's reason."""
    p = plan(MOE, _work(), SLO, gpus=[H200], tensor_parallel_sizes=(1, 8),
             data_parallel_sizes=(32,), expert_parallel=(True,), max_gpus=8,
             max_num_batched_tokens=(None,), price_overrides=PRICE, explain=False, **FAST)
    by_tp = {c.deployment.engine.tensor_parallel_size: c for c in p.candidates}
    assert by_tp[1].stage == "pruned_cost" and "32-GPU replica" in by_tp[1].reason
    assert by_tp[8].stage == "invalid"
    assert "expert parallelism over 256 GPUs (tp 8 x dp 32) exceeds the 128 experts" in (
        by_tp[8].reason)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 10), prompt=st.integers(8, 700), output=st.integers(1, 12),
       rate=st.floats(0.5, 50.0), seed=st.integers(0, 10_000),
       dp=st.sampled_from([2, 4]), ep=st.booleans())
def test_dp_zero_load_bounds_are_lower_bounds(n: int, prompt: int, output: int, rate: float,
                                              seed: int, dp: int, ep: bool) -> None:
    """No request of a lockstep DP group is faster than the funnel's zero-load bound for it
    (TTFT and E2EL), whatever the other ranks do: the pruning stays sound for DP."""
    from kvplan.analysis.plan.bounds import zero_load
    from kvplan.analysis.plan.judge import latencies

    m, g = load_model(MOE), load_gpu("H200")
    d = Deployment(model=m, gpu=g, engine=EngineConfig(
        data_parallel_size=dp, enable_expert_parallel=ep, max_model_len=1024,
        max_num_batched_tokens=256))
    rep = Replica(d)
    work = poisson_workload(n, rate, prompt=prompt, output=output, seed=seed)
    low, _ = zero_load(rep, work, SLO)
    got = latencies(rep.simulate(work), itl=False)
    assert np.all(got.ttft_ms >= low.ttft_ms * (1 - 1e-9))
    assert np.all(got.e2el_ms >= low.e2el_ms * (1 - 1e-9))


def test_infeasible_dp_plan_names_the_layout_and_advises_on_it() -> None:
    """Nothing meets a 3 ms TPOT: the closest DP2 + EP candidate is named with its layout in
    the one-line why and in summary.closest, and the what-if advice is priced on DP variants
    (every variant's timer builds: a DP step needs the GPU's kernel tables)."""
    p = _plan(TIGHT, data_parallel_sizes=(2,), expert_parallel=(True,), gpus=[H200, "H100"],
              price_overrides=(*PRICE, "H100=3"))
    assert p.winner is None
    assert "(H200-SXM-141GB TP 1 DP 2 EP, kv auto, chunk 8192)" in p.infeasible_why or (
        "(H100-SXM-80GB TP 1 DP 2 EP, kv auto, chunk 8192)" in p.infeasible_why)
    doc = plan_json(p)
    first = doc["summary"]["closest"][0]
    assert (first["data_parallel_size"], first["enable_expert_parallel"]) == (2, True)


def test_dp_plan_is_the_same_from_one_or_two_workers() -> None:
    """DP jobs are pure like the others: worker processes rebuild the lockstep group and
    give the identical plan document (but the wall time and worker count)."""
    docs = []
    for workers in (1, 2):
        d = plan_json(_plan(data_parallel_sizes=(1, 2), explain=False,
                            **{**FAST, "workers": workers}))
        for k in ("wall_s", "workers"):
            d["search_report"].pop(k)
        docs.append(d)
    assert docs[0] == docs[1]


def test_dp_ep_wins_where_the_experts_crowd_out_the_kv_cache() -> None:
    """Qwen3-30B-A3B on H100 (80 GiB), 3,000-token prompts: at TP1 the weights leave 94,848
    KV tokens, DP2 + EP splits the experts and leaves 385,280 per rank; at 8 req/s the TP1
    replica search needs 3 replicas ($12/h at $4 per GPU-hour), DP2 + EP one of 2 GPUs
    ($8/h, verified); TP1 at two replicas would tie at $8, so it is verified too: 3."""
    work = poisson_workload(300, 8.0, prompt=3000, output=300, seed=3, spread=0.0)
    p = plan(MOE, work, slo("ttft:p99:3000", "tpot:p99:60"), gpus=["H100"],
             tensor_parallel_sizes=(1,), data_parallel_sizes=(1, 2), expert_parallel=(True,),
             max_num_batched_tokens=(None,), price_overrides=("H100=4",), **FAST)
    tp1, dp2 = p.candidates
    assert (tp1.kv_cache_tokens, dp2.kv_cache_tokens) == (94_848, 385_280)
    # TP1 with one replica fewer would cost the best $8 exactly: verified for the tie (at
    # equal cost the larger margin wins), and it needs its 3 replicas
    assert tp1.stage == "verified" and tp1.replicas == 3
    assert tp1.usd_per_hour == pytest.approx(12.0)
    w = p.winner
    assert w is dp2 or (w is not None and w.id == dp2.id)
    assert w is not None and w.replicas == 1 and w.usd_per_hour == pytest.approx(8.0)
    assert "--data-parallel-size 2 --enable-expert-parallel" in p.serve_command


def test_tp_winner_of_an_moe_model_gets_the_dp_ep_what_ifs() -> None:
    """A TP2 winner (the space holds DP 1 only) is tried as DP2 + EP ranks of TP1 on the same
    two GPUs and as a DP2 + EP group of TP2 ranks; each row verified and priced as
    replicas x GPUs x $4."""
    p = _plan(tensor_parallel_sizes=(2,), data_parallel_sizes=(1,))
    assert p.winner is not None and p.winner.deployment.engine.tensor_parallel_size == 2
    rows = {lv.change: lv for lv in p.levers}
    same = rows["--tensor-parallel-size 1 --data-parallel-size 2 --enable-expert-parallel"]
    wider = rows["--data-parallel-size 2 --enable-expert-parallel"]
    assert same.verified and same.usd_per_hour == pytest.approx(8.0 * (same.replicas or 0))
    assert wider.verified and wider.usd_per_hour == pytest.approx(16.0 * (wider.replicas or 0))
