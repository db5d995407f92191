"""Routers assign arrivals from what they would see; fleets simulate every replica's share."""

from __future__ import annotations

import numpy as np
import pytest

import kvplan
from kvplan.analysis.plan.capacity_search import find_capacity, probe
from kvplan.analysis.plan.fleet import (
    Replica,
    least_outstanding,
    prefix_affinity,
    round_robin,
    simulate_fleet,
)
from kvplan.errors import InputError
from kvplan.specs.deployment import Deployment
from kvplan.specs.requests.workload import Workload
from tests.plan_helpers import poisson_workload, slo


def test_round_robin() -> None:
    assert round_robin(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_least_outstanding_sees_answers() -> None:
    # arrivals at 0, 1, 2, 3 s; request 0 takes 10 s, the others 0.5 s; 2 replicas:
    # r0 <- 0 (busy until 10); 1 -> r1 (idle) ... each later one finds r1 empty again
    arrival = np.array([0.0, 1.0, 2.0, 3.0])
    answer = np.array([10.0, 0.5, 0.5, 0.5])
    assert least_outstanding(arrival, answer, 2).tolist() == [0, 1, 1, 1]
    # answers slower than the gaps: outstanding counts balance the two replicas
    assert least_outstanding(arrival, np.full(4, 100.0), 2).tolist() == [0, 1, 0, 1]


def test_prefix_affinity_follows_the_longest_cached_prefix() -> None:
    # r0 <- [5,1]; [9] matches nothing -> least loaded r1; [5,1,7] matches 2 blocks on r0;
    # [] -> least loaded r2; [9,3] matches r1; [5,2] matches 1 block on r0
    blocks = ([5, 1], [9], [5, 1, 7], [], [9, 3], [5, 2])
    hashes = tuple(np.array(h, dtype=np.int64) for h in blocks)
    n = len(hashes)
    w = Workload(name="p", arrival_s=np.arange(float(n)), prompt_tokens=np.full(n, 64),
                 output_tokens=np.full(n, 4), prefix_hashes=hashes, hash_block_tokens=16)
    assert prefix_affinity(w, 3).tolist() == [0, 1, 0, 2, 1, 0]
    with pytest.raises(InputError, match="prefix ids"):
        prefix_affinity(poisson_workload(5, 1.0, 100, 10), 2)


def _rep(router: str = "round-robin") -> Replica:
    d = Deployment(model=kvplan.load_model("meta-llama/Llama-3.1-8B"),
                   gpu=kvplan.load_gpu("L40S"),
                   engine=kvplan.EngineConfig(max_model_len=4096), router=router)
    return Replica(d)


def test_fleet_simulates_every_replica_share() -> None:
    work = poisson_workload(240, 12.0, 1000, 100)
    s = slo("ttft:p99:1000", "tpot:p99:50")
    one = simulate_fleet(_rep(), work, 1, s)
    three = simulate_fleet(_rep("least-outstanding"), work, 3, s)
    assert sum(three.requests_per_replica) == 240 and len(three.requests_per_replica) == 3
    assert min(three.requests_per_replica) > 40
    assert three.verdict.value("p99_ttft_ms") < one.verdict.value("p99_ttft_ms")
    assert three.output_tokens == int(work.output_tokens.sum())


def test_capacity_bracket_passes_below_and_fails_above() -> None:
    rep = _rep()
    unit = poisson_workload(150, 1.0, 1000, 100)
    s = slo("ttft:p99:800", "tpot:p99:45")
    cap = find_capacity(rep, unit, s, guess=2.0, ceiling=200.0)
    assert cap.lo is not None and cap.hi is not None and cap.lo.verdict.ok
    assert not cap.hi.verdict.ok
    assert cap.hi.rate_rps - cap.lo.rate_rps <= 0.03 * cap.lo.rate_rps + 1e-9 or cap.probes == 10
    # common random numbers: the same rate replays the same requests -> the same verdict
    again = probe(rep, unit, s, cap.lo.rate_rps)
    assert again.verdict == cap.lo.verdict
