"""The local executor's kept results and offered jobs (analysis/plan/executor.LocalExecutor):
a job equal to one already run takes its result, an offered job run early gives what the job
run when asked gives, and neither crosses plans (contexts). Jobs are pure, so each answer is
checked against a fresh run of the same job in this process."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import kvplan
from kvplan.analysis.plan.executor import LocalExecutor
from kvplan.analysis.plan.jobs import (
    CapacityJob,
    FleetJob,
    Job,
    JobContext,
    ProbeJob,
    run_job,
)
from kvplan.analysis.plan.traffic import plan_traffic
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.plan_helpers import FAST, slo

M8 = "meta-llama/Llama-3.1-8B"


def _ctx(tpot: str = "60") -> JobContext:
    args = kvplan.WorkloadArgs(dataset="azure-conv", num_prompts=400, seed=0)
    t = plan_traffic(args, sample=FAST["sample_requests"])
    return JobContext(unit=t.unit, target=t.target, slo=slo("ttft:p99:2000", f"tpot:p99:{tpot}"),
                      rate_rps=t.rate_rps)


def _jobs(seqs: int = 256) -> list[Job]:
    d = Deployment(model=load_model(M8), gpu=load_gpu("H100"),
                   engine=EngineConfig(max_num_seqs=seqs))
    return [FleetJob(deployment=d, replicas=1), FleetJob(deployment=d, replicas=2),
            CapacityJob(deployment=d, guess_rps=2.0, ceiling_rps=8.0, target_rps=4.0,
                        floor_replicas=1, cap_replicas=4),
            ProbeJob(deployment=d, rate_rps=3.0)]


class _Counting(LocalExecutor):
    """Counts the jobs handed to a worker process."""

    def __init__(self, workers: int) -> None:
        super().__init__(workers)
        self.submitted: list[Job] = []

    def _submit(self, ctx: JobContext, job: Job) -> Any:
        self.submitted.append(job)
        return super()._submit(ctx, job)


@pytest.fixture(scope="module")
def ctx() -> JobContext:
    return _ctx()


def test_a_repeated_job_takes_the_first_result(ctx: JobContext) -> None:
    """The same batch twice, then equal jobs built anew: fresh answers the first time, the
    kept ones after, and nothing runs twice."""
    jobs = _jobs()
    want = [run_job(ctx, j) for j in jobs]
    ex = _Counting(2)
    try:
        assert ex.run(ctx, jobs) == want
        assert len(ex.submitted) == len(jobs)
        assert ex.run(ctx, jobs) == want
        again = [replace(j) for j in reversed(_jobs())]  # equal, not the same objects
        assert ex.run(ctx, again) == want[::-1]
        assert ex.run(ctx, again[:1]) == want[-1:]
        assert len(ex.submitted) == len(jobs)
    finally:
        ex.close()


def test_offered_jobs_run_early_and_give_what_running_them_gives(ctx: JobContext) -> None:
    """Offered jobs go to idle workers at once; asked for later (in another order, with a job
    not offered), each answer is the fresh one, and no job runs twice."""
    jobs = _jobs()
    ex = _Counting(2)
    try:
        ex.offer(ctx, jobs[:3])
        assert ex.submitted == jobs[:2]  # two workers: two tasks in flight at most
        got = ex.run(ctx, [jobs[3], jobs[2], jobs[0]])
        assert got == [run_job(ctx, j) for j in (jobs[3], jobs[2], jobs[0])]
        # the third offered job was still waiting for a worker: asked for, it is a job
        # like any other; the first two were taken where they ran
        assert ex.submitted == [*jobs[:2], jobs[3], jobs[2]]
        assert ex.run(ctx, jobs[1:2]) == [run_job(ctx, jobs[1])]
        ex.offer(ctx, [])
        assert len(ex.submitted) == len(jobs)  # each job ran once
    finally:
        ex.close()


def test_kept_results_never_cross_contexts(ctx: JobContext) -> None:
    """Another plan's context (a tighter TPOT) runs the equal jobs again, and its answers are
    its own; then the first context's answers are computed afresh too."""
    tight = _ctx("20")
    jobs = _jobs()[:2]
    ex = _Counting(2)
    try:
        first = ex.run(ctx, jobs)
        other = ex.run(tight, jobs)
        assert other == [run_job(tight, j) for j in jobs]
        assert other != first  # the verdicts differ: the answer is not the kept one
        assert ex.run(ctx, jobs) == first
        assert len(ex.submitted) == 3 * len(jobs)
    finally:
        ex.close()


def test_one_process_keeps_and_offers_nothing(ctx: JobContext) -> None:
    """workers=1 runs each job when asked, here: an offer starts no worker process."""
    jobs = _jobs()[:1]
    ex = _Counting(1)
    ex.offer(ctx, jobs)
    assert ex.run(ctx, jobs) == [run_job(ctx, jobs[0])]
    assert ex.submitted == []
    ex.close()
