"""What the planner builds once and reuses (analysis/plan/fleet.replica) and verifies side by
side (analysis/plan/search.verify_many) gives what building and verifying one by one gives."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import kvplan
from kvplan.analysis.plan.executor import LocalExecutor
from kvplan.analysis.plan.fleet import Replica, replica
from kvplan.analysis.plan.funnel import Limits, Tally
from kvplan.analysis.plan.jobs import JobContext
from kvplan.analysis.plan.search import verify, verify_many
from kvplan.analysis.plan.traffic import plan_traffic
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import load_gpu
from kvplan.specs.requests.arrays import Workload
from kvplan.specs.serving import EngineConfig
from tests.plan_helpers import FAST, slo

M8 = "meta-llama/Llama-3.1-8B"


def _d(seqs: int = 256, **gpu: object) -> Deployment:
    g = load_gpu("H100")
    return Deployment(model=load_model(M8), gpu=replace(g, **gpu) if gpu else g,
                      engine=EngineConfig(max_num_seqs=seqs))


def test_a_replica_is_built_once_per_everything_it_reads() -> None:
    a = replica(_d())
    assert replica(_d()) is a  # equal deployments: the one built
    assert replica(_d(seqs=128)) is not a  # another engine
    other = replica(_d(mem_bw_bytes_per_s=1.0e12))  # same id, other figures: its own
    assert other is not a and other.deployment.gpu.mem_bw_bytes_per_s == 1.0e12
    fresh = Replica(_d())  # what it keeps is what building anew gives
    assert (fresh.plan, fresh.limits) == (a.plan, a.limits)
    n, c = np.array([100, 1]), np.array([0, 500])
    assert fresh.timer.step_time_s(n, c) == a.timer.step_time_s(n, c)


def test_verifying_side_by_side_gives_what_one_by_one_gives() -> None:
    """The verified candidates of a small target-mode plan, verified again both ways: the
    same candidates and the same simulation counts."""
    s = slo("ttft:p99:2000", "tpot:p99:60")
    args = kvplan.WorkloadArgs(num_prompts=300, random_input_len=1500, random_output_len=150,
                               request_rate=12, seed=0)
    p = kvplan.plan(M8, args, s, gpus=["H100", "L40S"], tensor_parallel_sizes=[1, 2],
                    max_num_seqs=[64, None], max_num_batched_tokens=[None], explain=False,
                    **FAST)
    done = [c for c in p.candidates if c.stage == "verified"]
    assert len(done) >= 2
    t = plan_traffic(args, sample=FAST["sample_requests"])
    ctx = JobContext(unit=t.unit, target=t.target, slo=s, rate_rps=t.rate_rps)
    lim = Limits(rate_rps=t.rate_rps, replicas=None, max_gpus=None, max_cost_per_hour=None,
                 mean_output_tokens=t.mean_output_tokens, exhaustive=False,
                 target_requests=len(t.target) if t.target is not None else 0)
    ex = LocalExecutor(1)
    one, many = Tally(), Tally()
    alone = [verify(c, ex, ctx, p.prices, lim, one) for c in done]
    together = verify_many(done, ex, ctx, p.prices, lim, many)
    assert together == alone
    assert (many.fleet_simulations, many.sim_requests) == (one.fleet_simulations,
                                                           one.sim_requests)
    assert one.fleet_simulations >= len(done)


@pytest.mark.parametrize("router", ["round-robin", "prefix-affinity", "least-outstanding"])
def test_a_fleets_replicas_side_by_side_give_the_fleet(router: str) -> None:
    """executor.run_fleet_jobs with idle workers runs each replica as a job of its own
    (least-outstanding stays whole): the same FleetInfo, bit for bit, as the whole fleet in
    one job, for a batch of one fleet and of two (N and N - 1)."""
    from kvplan.analysis.plan.executor import run_fleet_jobs
    from kvplan.analysis.plan.jobs import FleetJob, run_job

    s = slo("ttft:p99:2000", "tpot:p99:60")
    args = kvplan.WorkloadArgs(dataset="azure-conv", num_prompts=600, seed=0)
    t = plan_traffic(args, sample=FAST["sample_requests"])
    target = t.target
    assert target is not None
    if router == "prefix-affinity":  # conversations of 16 requests share a leading block
        hashes = tuple(np.array([i // 16, 10_000 + i], dtype=np.int64)
                       for i in range(len(target)))
        target = Workload(name="c", arrival_s=target.arrival_s,
                          prompt_tokens=target.prompt_tokens,
                          output_tokens=target.output_tokens, prefix_hashes=hashes,
                          hash_block_tokens=16)
    ctx = JobContext(unit=t.unit, target=target, slo=s, rate_rps=t.rate_rps)
    d = replace(_d(), router=router)
    jobs = [FleetJob(deployment=d, replicas=n) for n in (3, 2)]
    want = [run_job(ctx, j) for j in jobs]
    ex = LocalExecutor(4)
    kinds: list[str] = []
    real = ex.run

    def spy(c: JobContext, batch: list) -> list:
        kinds.extend(type(j).__name__ for j in batch)
        return real(c, batch)

    ex.run = spy  # type: ignore[method-assign]
    try:
        assert run_fleet_jobs(ex, ctx, jobs) == want
        assert run_fleet_jobs(ex, ctx, jobs[:1]) == want[:1]
    finally:
        ex.close()
    split = router != "least-outstanding"
    assert kinds == (["PartJob"] * 8 if split else ["FleetJob"] * 3)
