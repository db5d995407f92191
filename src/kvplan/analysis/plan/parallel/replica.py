"""One DP group as a planner replica: dp lockstep engines behind vLLM's DP load balancer.

A replica of a DP / EP candidate is one ``vllm serve --data-parallel-size dp`` (dp engines
of tp x pp GPUs, its MoE layers in lockstep); the planner's router spreads the fleet's
requests over such replicas, and each replica's share is replayed by
``kvplan.sim.dp.lockstep.simulate_dp`` (``analysis.dp_serving.dp_rank_sim`` builds what each
rank runs with). The merged result is what a client of that ``vllm serve`` sees: each
request's times from its rank; the steps' KV blocks, running and new tokens summed over the
ranks (so the replica's KV usage is the group's pool as a whole).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.sim.result import SimulationResult
from kvplan.specs.requests.workload import Workload

if TYPE_CHECKING:
    from kvplan.sim.dp.lockstep import RankSim


def simulate_group(sim: RankSim, work: Workload) -> SimulationResult:
    """The lockstep simulation of one DP group on ``work`` (its fleet view)."""
    from kvplan.sim.dp.lockstep import simulate_dp

    return simulate_dp(work, sim).fleet


