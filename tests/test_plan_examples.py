"""Issue 17's two examples, cut to CI size: every figure of the answer is one fleet's.

mooncake-conversation with a fixed fleet: the old search judged one replica's sample with
its arrival times divided by the rate ("misses p99_tpot_ms by 853 %"); the answer now is the
fleet's own verdict, equal to an independent re-simulation of its round-robin shares.
azure-code at half its time scale: the winner, the per-replica load, the lever table's first
row and the verified fleet agree, the fleet is the whole (cut) trace and says so, and each
percentile carries its sampling interval.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvplan
from kvplan.analysis.plan.fleet import subset
from kvplan.analysis.plan.judge import judge, latencies, merge
from kvplan.analysis.plan.records import Candidate, Plan
from kvplan.analysis.plan.traffic import plan_traffic
from kvplan.report.plan.plan_json import plan_json
from kvplan.specs.deployment import Deployment
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo
from tests.plan_helpers import slo


def fleet_verdict(d: Deployment, work: Workload, replicas: int, s: Slo) -> dict[str, float]:
    """kvplan.simulate_serving on each round-robin share, judged as one fleet."""
    parts = []
    for k in range(replicas):
        ids = np.arange(k, len(work), replicas, dtype=np.int64)
        run = kvplan.simulate_serving(d.model, d.gpu, d.engine, subset(work, ids))
        parts.append((latencies(run.result), ids))
    return dict(judge(merge(parts), s).achieved)


def test_mooncake_fixed_fleet_is_judged_as_a_fleet() -> None:
    args = kvplan.WorkloadArgs(dataset="mooncake-conversation", num_prompts=300)
    s = slo("ttft:p99:5000", "tpot:p99:60")
    p = kvplan.plan("meta-llama/Llama-3.1-8B", args, s, gpus=["H100"],
                    tensor_parallel_sizes=[1], max_num_batched_tokens=[None], replicas=8,
                    sample_requests=100, workers=1)
    assert p.winner is None and p.trace_requests == 12031 and p.requests == 300
    doc = plan_json(p)["summary"]
    near = doc["closest"][0]
    c = next(x for x in p.candidates if x.id == near["id"])
    got = fleet_verdict(c.deployment, plan_traffic(args, sample=100).target, 8, s)  # type: ignore[arg-type]
    # the miss is the fleet's: the term, its value and the margin all re-simulate exactly
    limits = {b.key: b.limit_ms for b in s.bounds}
    key = min(got, key=lambda k: (limits[k] - got[k]) / limits[k])
    assert near["misses"] == key == "p99_ttft_ms" and near["replicas"] == 8
    assert near["achieved"] == pytest.approx(got[key])
    assert near["margin"] == pytest.approx((5000 - got[key]) / 5000)
    assert f"misses p99_ttft_ms by {100 * abs(near['margin']):.0f} %" in doc["why"]


def test_azure_code_answer_is_one_verified_fleet() -> None:
    args = kvplan.WorkloadArgs(dataset="azure-code", time_scale=0.5, num_prompts=600)
    s = slo("ttft:p99:1500", "tpot:p99:60")
    p = kvplan.plan("meta-llama/Llama-3.1-70B", args, s, gpus=["H100"],
                    tensor_parallel_sizes=[4, 8], sample_requests=200, workers=1)
    w = p.winner
    assert w is not None and w.fleet is not None and w.replicas is not None
    rate = p.target_rate_rps
    assert rate is not None
    doc = plan_json(p)
    sm, first = doc["summary"], doc["levers"][0]
    # one set of numbers: the per-replica load is what each replica of the fleet serves
    assert sm["capacity_rps_per_replica"] == pytest.approx(rate / w.replicas)
    assert (first["replicas"], first["usd_per_hour"], first["capacity_rps"]) == (
        sm["replicas"], sm["usd_per_hour"], sm["capacity_rps_per_replica"])
    assert first["binding_p99_ms"] == dict(w.fleet.achieved)[first["binding_key"]]
    # the whole (cut) trace was verified, and the answer says what share of it
    assert sum(w.fleet.requests_per_replica) == 600
    assert (sm["verified_requests"], sm["trace_requests"]) == (600, 8819)
    assert sm["verified_share"] == pytest.approx(600 / 8819)
    # an independent re-simulation of the round-robin shares agrees; one fewer misses
    work = plan_traffic(args, sample=200).target
    assert work is not None
    again = fleet_verdict(w.deployment, work, w.replicas, s)
    assert again == pytest.approx(dict(w.fleet.achieved))
    assert w.fleet_one_fewer is not None and not w.fleet_one_fewer.ok
    _one_fewer_line_counts(p, w)
    # TP16 would span two 8-GPU nodes: the lever row says so instead of "no fleet"
    if w.deployment.engine.tensor_parallel_size == 8:
        tp16 = next(x for x in doc["levers"] if x["change"] == "--tensor-parallel-size 16")
        assert "more than one 8-GPU" in tp16["note"]
    _intervals_hold(sm, dict(w.fleet.achieved), s)


def _one_fewer_line_counts(p: Plan, w: Candidate) -> None:
    """'With 1 replica', not 'With 1 replicas' (the line printed 'With 1 replicas: misses')."""
    from dataclasses import replace

    from rich.console import Console

    from kvplan.report.plan.plan_text import _winner

    fewer = w.fleet_one_fewer
    assert fewer is not None
    for n, words in ((1, "With 1 replica: misses"), (3, "With 3 replicas: misses")):
        c = Console(record=True, width=300)
        _winner(p, replace(w, fleet_one_fewer=replace(fewer, replicas=n)), c)
        assert words in c.export_text()


def _intervals_hold(sm: dict[str, object], achieved: dict[str, float], s: Slo) -> None:
    """Each percentile's interval brackets its estimate; within_noise = limit inside it."""
    intervals = sm["intervals"]
    assert isinstance(intervals, dict) and set(intervals) == set(achieved)
    for b in s.bounds:
        lo, hi = intervals[b.key]
        assert lo is not None and lo <= achieved[b.key]
        assert hi is None or achieved[b.key] <= hi
        inside = lo <= b.limit_ms and (hi is None or b.limit_ms < hi)
        assert (b.key in sm["within_noise"]) == inside  # type: ignore[operator]
