"""Executors: run batches of planner jobs here, in worker processes, or as Ray tasks.

Results always come back in submission order, so a plan does not depend on the executor
or the worker count. Ray is optional (``pip install 'kvplan[ray]'``) and imported on use.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kvplan.analysis.plan.jobs import (
    FleetJob,
    FleetOut,
    Job,
    JobContext,
    Out,
    PartJob,
    PartOut,
    fleet_info,
    run_job,
    run_jobs,
)
from kvplan.errors import InputError
from kvplan.limits import check_int
from kvplan.notes import note

if TYPE_CHECKING:
    from concurrent.futures import Future

EXECUTORS = ("auto", "local", "ray")
RAY_MIN_SCREENED = 700
"""``--executor auto`` takes Ray only for a cluster (``--ray-address``) and a plan with at least
this many screened candidates (docs/planner.md, Execution: Ray's start-up, about 4.6 s here,
against about 0.026 CPU-s of planning per screened candidate; below this the start costs
more than a cluster twice the local workers saves)."""


class Executor(Protocol):
    name: str
    workers: int

    def run(self, ctx: JobContext, jobs: Sequence[Job]) -> list[Out]: ...

    def offer(self, ctx: JobContext, jobs: Sequence[Job]) -> None:
        """Jobs a later ``run`` will likely ask for (replacing those offered before): an
        executor may run them early on workers that would otherwise wait."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    """Worker processes (fork), one job per task; ``workers=1`` runs in this process.

    Jobs are pure, so a job equal to one already run (or started) in this plan takes that
    result: the lever what-ifs repeat searches and fleets the search ran. A batch of one job
    runs here while offered jobs (``offer``) fill the workers; offered jobs run only on a
    free worker (never more than ``workers`` tasks at once), so they never hold back a job
    already asked for."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool: Any = None
        self._offered: list[Job] = []
        self._known: dict[tuple[object, ...], list[tuple[Job, Future[Out]]]] = {}
        """Every job run or started (replica jobs aside), by ``_key``, with its result."""
        self._busy: set[Future[Out]] = set()
        self._ctx: JobContext | None = None

    def run(self, ctx: JobContext, jobs: Sequence[Job]) -> list[Out]:
        if self.workers == 1:
            return run_jobs(ctx, jobs)
        self._use(ctx)
        mine = [self._take(job) for job in jobs]
        here = [i for i, f in enumerate(mine) if f is None]
        if len(here) == 1:  # one job left to run: here, beside the workers
            self._fill(ctx, self.workers - 1)
            mine[here[0]] = self._keep(jobs[here[0]], _done(run_job(ctx, jobs[here[0]])))
        for i in here if len(here) > 1 else ():
            mine[i] = self._keep(jobs[i], self._submit(ctx, jobs[i]))
        from concurrent.futures import FIRST_COMPLETED, wait

        futures = [f for f in mine if f is not None]
        self._fill(ctx, self.workers)
        while not all(f.done() for f in futures):
            wait([f for f in futures if not f.done()], return_when=FIRST_COMPLETED)
            self._fill(ctx, self.workers)
        return [f.result() for f in futures]

    def offer(self, ctx: JobContext, jobs: Sequence[Job]) -> None:
        if self.workers == 1:  # one process: nothing runs early
            return
        self._use(ctx)
        self._offered = [j for j in jobs if self._find(j) is None]
        self._fill(ctx, self.workers)

    def _use(self, ctx: JobContext) -> None:
        """Results are kept for one context (one plan's traffic and SLO)."""
        if ctx is not self._ctx:
            self._ctx, self._known, self._offered = ctx, {}, []

    def _find(self, job: Job) -> Future[Out] | None:
        for e, f in self._known.get(_key(job), ()):
            if e == job:
                return f
        return None

    def _take(self, job: Job) -> Future[Out] | None:
        """The result (or the running task) of an equal job; it stays offered no more."""
        self._offered = [j for j in self._offered if j != job]
        return self._find(job)

    def _keep(self, job: Job, f: Future[Out]) -> Future[Out]:
        if not isinstance(job, PartJob):  # a replica's latencies: large, never asked twice
            self._known.setdefault(_key(job), []).append((job, f))
        return f

    def _submit(self, ctx: JobContext, job: Job) -> Future[Out]:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.workers,
                                             mp_context=multiprocessing.get_context("fork"))
        f: Future[Out] = self._pool.submit(run_job, ctx, job)
        self._busy.add(f)
        return f

    def _fill(self, ctx: JobContext, slots: int) -> None:
        """Hand offered jobs to workers while fewer than ``slots`` tasks are in flight."""
        self._busy = {f for f in self._busy if not f.done()}
        while self._offered and len(self._busy) < slots:
            job = self._offered.pop(0)
            self._keep(job, self._submit(ctx, job))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        self._offered, self._known, self._busy, self._ctx = [], {}, set(), None


def _key(job: Job) -> tuple[object, ...]:
    """A hashable digest of a job (equal jobs share it; equality decides within it)."""
    d = job.deployment
    return (type(job), d.gpu.id, d.engine, d.router, getattr(job, "replicas", None))


def _done(out: Out) -> Future[Out]:
    from concurrent.futures import Future

    f: Future[Out] = Future()
    f.set_result(out)
    return f


class RayExecutor:
    """Plain Ray tasks, each over a batch of jobs (about one batch per CPU per round)."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            import logging

            import ray
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'kvplan[ray]'") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            kwargs: dict[str, Any] = {"address": address} if address else {
                "num_cpus": workers or os.cpu_count() or 1}
            ray.init(include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR, **kwargs)
        resources = getattr(ray, "cluster_resources")()  # noqa: B009 (untyped in Ray)
        self.workers = max(1, int(resources.get("CPU", 1)))
        self._task = ray.remote(num_cpus=1)(run_jobs)
        self._ctx: Any = None
        self._ctx_key: int | None = None

    def run(self, ctx: JobContext, jobs: Sequence[Job]) -> list[Out]:
        if self._ctx_key != id(ctx):
            self._ctx, self._ctx_key = self._ray.put(ctx), id(ctx)
        n = max(1, min(self.workers, len(jobs)))
        batches = [list(jobs[i::n]) for i in range(n)]
        results = self._ray.get([self._task.remote(self._ctx, b) for b in batches])
        out: list[Out | None] = [None] * len(jobs)
        for i, batch in enumerate(results):
            for j, r in enumerate(batch):
                out[i + j * n] = r
        return [r for r in out if r is not None]

    def offer(self, ctx: JobContext, jobs: Sequence[Job]) -> None:
        """Ray runs what it is asked for only."""

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


def check_executor(name: str) -> None:
    if name not in EXECUTORS:
        raise InputError(f"--executor {name!r}: choose one of {', '.join(EXECUTORS)}")


WORKERS_PER_CPU = 4
"""--workers allowed per CPU: the jobs are CPU-bound, so more only cost memory and start-up
(--workers 100000 forked processes until a 2-core machine stalled)."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity; else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_workers(workers: int | None) -> None:
    """--workers: 1 .. WORKERS_PER_CPU x the usable CPUs."""
    if workers is None:
        return
    cpus = usable_cpus()
    try:
        check_int("--workers", workers, 1, WORKERS_PER_CPU * cpus)
    except InputError as exc:
        raise InputError(f"{exc} ({WORKERS_PER_CPU} per CPU: this machine lets kvplan use "
                         f"{cpus}; the jobs are CPU-bound, so more only cost memory)") from None


def executor_choice(name: str, address: str | None, screened: int) -> tuple[str, str]:
    """(executor to run, a note when Ray is expected to be slower than local, else "").

    Ray starts a local instance (or joins ``address``) and ships every batch; on this
    machine's own cores it runs the same jobs as the local pool, so it can only win on a
    cluster with more CPUs, and only once the plan's simulation outweighs its start-up.
    """
    check_executor(name)
    big = address is not None and screened >= RAY_MIN_SCREENED
    if name == "auto":
        return ("ray" if big else "local"), ""
    if name == "local" or big:
        return name, ""
    why = ("without --ray-address Ray runs on this machine's cores, as local does"
           if address is None else
           f"{screened} screened candidates, below the {RAY_MIN_SCREENED} where its start-up "
           "pays off")
    return name, (f"--executor ray is expected to be slower than local here ({why}; "
                  "docs/planner.md, Execution)")


def pick_executor(name: str, workers: int | None, address: str | None, screened: int
                  ) -> Executor:
    """The executor ``executor_choice`` picks, its note (if any) logged once."""
    chosen, why = executor_choice(name, address, screened)
    if why:
        note(why)
    return make_executor(chosen, workers, address)


def make_executor(name: str, workers: int | None = None, address: str | None = None
                  ) -> Executor:
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(address, workers)
    raise InputError(f"--executor {name!r}: choose one of {', '.join(EXECUTORS)}")


def run_fleet_jobs(ex: Executor, ctx: JobContext, jobs: list[FleetJob]) -> list[FleetOut]:
    """``ex.run`` of fleet jobs; a batch smaller than the workers (verification's N and
    N - 1, one lever's fleet) runs each fleet's replicas as jobs of their own, side by side,
    and judges their union here: the same simulations, the same order, the same FleetInfo
    (not for ITL SLOs, whose per-token gaps are not worth moving, nor least-outstanding,
    whose routing needs a first pass)."""
    split = (ex.workers > 1 and len(jobs) < ex.workers and ctx.target is not None
             and all(_splits(ctx, j) for j in jobs))
    if not split:
        return [o for o in ex.run(ctx, jobs) if isinstance(o, FleetOut)]
    from kvplan.analysis.plan.fleet import fleet_from_parts

    parts = [PartJob(deployment=j.deployment, replicas=j.replicas, index=k)
             for j in jobs for k in range(j.replicas)]
    got = iter([o for o in ex.run(ctx, parts) if isinstance(o, PartOut)])
    outs = []
    for j in jobs:
        mine = [next(got) for _ in range(j.replicas)]
        assert ctx.target is not None
        run = fleet_from_parts([o.part for o in mine if o.part is not None], ctx.target,
                               j.replicas, ctx.slo_for(j.deployment))
        outs.append(FleetOut(info=fleet_info(run, ctx, j.deployment), sim_requests=run.requests))
    return outs


def _splits(ctx: JobContext, job: FleetJob) -> bool:
    if job.replicas < 2 or ctx.slo_for(job.deployment).judges_itl:
        return False
    return job.deployment.router != "least-outstanding"

