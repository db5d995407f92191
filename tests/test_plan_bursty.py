"""Bursty traces: capacity is the fewest replicas whose router shares meet the SLO.

Requests that arrive together stay together at any time-stretch of one replica's sample,
so the old search (a sample replayed with arrival times divided by a rate) called bursts
unservable at any load. The router spreads them: the plan must find the fleet a real
round-robin router would need, and every figure must come from that verified fleet.
"""

from __future__ import annotations

import numpy as np
import pytest

import kvplan
from kvplan.analysis.plan.capacity_search import at_rate, probe
from kvplan.analysis.plan.fleet import Replica, subset
from kvplan.analysis.plan.judge import judge, latencies, merge
from kvplan.analysis.plan.records import Plan
from kvplan.specs.requests.workload import Workload
from tests.plan_helpers import slo

M8 = "meta-llama/Llama-3.1-8B"
FAST = {"sample_requests": 120, "workers": 1}


def bursts(n_bursts: int, size: int, every_s: float, prompt: int, output: int) -> Workload:
    """``size`` requests at the same instant every ``every_s`` seconds (mooncake-like)."""
    n = n_bursts * size
    arrival = np.repeat(np.arange(n_bursts) * every_s, size).astype(np.float64)
    rng = np.random.default_rng(0)
    return Workload(name="bursts", arrival_s=arrival,
                    prompt_tokens=rng.integers(prompt // 2, prompt + 1, n),
                    output_tokens=rng.integers(output // 2, output + 1, n))


BURSTY = bursts(24, 16, 10.0, 2000, 120)
BURSTY_SLO = slo("ttft:p99:1500", "tpot:p99:80")


def shares_pass(p: Plan, work: Workload, replicas: int) -> tuple[bool, dict[str, float]]:
    """Independent check: kvplan.simulate_serving on each round-robin share, judged together."""
    w = p.winner
    assert w is not None
    parts = []
    for k in range(replicas):
        ids = np.arange(k, len(work), replicas, dtype=np.int64)
        run = kvplan.simulate_serving(w.deployment.model, w.deployment.gpu, w.deployment.engine,
                                      subset(work, ids))
        parts.append((latencies(run.result), ids))
    v = judge(merge(parts), p.slo)
    return v.ok, dict(v.achieved)


def test_bursts_the_router_spreads_are_feasible() -> None:
    p = kvplan.plan(M8, BURSTY, BURSTY_SLO, gpus=["L40S"], tensor_parallel_sizes=[1],
                    max_num_batched_tokens=[None], explain=False, **FAST)
    w = p.winner
    assert w is not None and w.replicas is not None and w.fleet is not None
    assert w.capacity is not None and w.capacity.method == "router-share"
    # the whole trace is verified, and an independent re-simulation agrees both ways
    assert sum(w.fleet.requests_per_replica) == len(BURSTY)
    ok, got = shares_pass(p, BURSTY, w.replicas)
    assert ok and got == pytest.approx(dict(w.fleet.achieved))
    assert w.replicas == 1 or not shares_pass(p, BURSTY, w.replicas - 1)[0]
    # the cause of the old answer: one replica's sample, time-stretched to the per-replica
    # load, keeps every 16-request burst together and misses TTFT at that very load
    rep = Replica(w.deployment.with_replicas(1))
    unit = subset(BURSTY, np.arange(len(BURSTY), dtype=np.int64))
    stretched = Workload(name="u", arrival_s=unit.arrival_s * (p.target_rate_rps or 1.0),
                         prompt_tokens=unit.prompt_tokens, output_tokens=unit.output_tokens)
    old = probe(rep, stretched, BURSTY_SLO, (p.target_rate_rps or 1.0) / w.replicas)
    assert not old.verdict.ok and old.verdict.binding == "p99_ttft_ms"
    assert at_rate(stretched, 1.0).arrival_s.tolist() == stretched.arrival_s.tolist()


@pytest.mark.parametrize("router", ["round-robin", "prefix-affinity"])
def test_funnel_equals_exhaustive_on_bursty_spaces(router: str) -> None:
    work = BURSTY
    if router == "prefix-affinity":  # bursts of one conversation: shared leading blocks
        hashes = tuple(np.array([i // 16, 10_000 + i], dtype=np.int64) for i in range(len(work)))
        work = Workload(name="b", arrival_s=work.arrival_s, prompt_tokens=work.prompt_tokens,
                        output_tokens=work.output_tokens, prefix_hashes=hashes,
                        hash_block_tokens=512)
    space = {"gpus": ["L40S", "H100"], "tensor_parallel_sizes": [1],
             "kv_cache_dtypes": ["auto", "fp8"], "router": router}
    funnel = kvplan.plan(M8, work, BURSTY_SLO, explain=False, **space, **FAST)
    full = kvplan.plan(M8, work, BURSTY_SLO, explain=False, search="exhaustive", **space,
                       **FAST)
    assert funnel.winner is not None and full.winner is not None
    assert (funnel.winner.id, funnel.winner.replicas, funnel.winner.usd_per_hour) == (
        full.winner.id, full.winner.replicas, full.winner.usd_per_hour)
    assert funnel.report.sim_requests <= full.report.sim_requests
