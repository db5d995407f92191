"""Simulations and plans started from the page: queued behind the shared gate, run off the
event loop, one per client, cancellable while they wait or run."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kvplan.errors import InputError, KvplanError
from kvplan.web.gate import Busy, Gate, Left, Ticket, gated, spawn


class Cancelled(Exception):
    """Raised inside the simulation's progress callback to stop it."""


class Job:
    """One job's live state (read by the polling page, written by its thread)."""

    def __init__(self, job_id: str, client: str, deadline_s: float) -> None:
        self.id, self.client, self.deadline_s = job_id, client, deadline_s
        self.state = "running"
        self.stage: str | None = None
        self.done = self.total = self.ahead = 0
        self.result: dict[str, Any] | None = None
        self.charts: dict[str, Any] | None = None
        self.error: str | None = None
        self.cancel = threading.Event()

    def tick(self, done: int, total: int) -> None:
        """Progress from the simulator; stops it when cancelled or past its wall time."""
        self.done, self.total = done, total
        if self.cancel.is_set():
            raise Cancelled("cancelled from the page")
        if time.monotonic() > self.deadline_s:
            raise Cancelled("stopped: over the page's wall-time limit (kvplan web "
                            "--max-sim-seconds)")

    def view(self) -> dict[str, Any]:
        """The polled state; ``ahead`` counts the jobs and requests queued before this one;
        ``field``: the form field an ``error`` is about (None: none named)."""
        from kvplan.web.errors import field_of

        return {"job": self.id, "state": self.state, "stage": self.stage, "done": self.done,
                "total": self.total, "ahead": self.ahead, "result": self.result,
                "error": self.error,  # a refusal names its form field, as a 422 does
                "field": field_of(self.error) if self.state == "error" and self.error else None}


def deadline(settings: Any) -> float:
    """When a run started now must stop (monotonic clock)."""
    return time.monotonic() + float(settings.max_sim_seconds)


Work = Callable[[Job], tuple[dict[str, Any], dict[str, Any]]]


class Jobs:
    """Running, queued and finished jobs; every start takes its turn at ``gate``."""

    def __init__(self, gate: Gate, max_seconds: float, keep: int = 32) -> None:
        self.gate, self.max_seconds, self.keep = gate, max_seconds, keep
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, client: str, work: Work) -> Job:
        """Queue ``work(job)``; Busy: 429 when this client has one, 503 when the line is full."""
        with self._lock:
            mine = [j for j in self._jobs.values()
                    if j.client == client and j.state in ("queued", "running")]
            if mine:
                raise Busy(f"a simulation or plan (job {mine[0].id}) is already running or "
                           "queued for this page; cancel it or wait for it",
                           self.gate.retry_after(), status=429, job=mine[0].id)
            ticket = self.gate.admit()
            job = Job(uuid.uuid4().hex[:12], client, time.monotonic() + self.max_seconds)
            job.ahead = self.gate.ahead(ticket)
            job.state = "queued" if job.ahead else "running"
            self._jobs[job.id] = job
            self._trim()
        spawn(self.gate, ticket, lambda: self._run(job, ticket, work))
        return job

    def _run(self, job: Job, ticket: Ticket, work: Work) -> None:
        try:
            self.gate.wait(ticket, stop=lambda: self._queued(job, ticket))
            job.state, job.ahead = "running", 0
            job.deadline_s = time.monotonic() + self.max_seconds
            job.result, job.charts = work(job)
            job.state = "done"
        except Left:
            job.state, job.error = "cancelled", "cancelled from the page while queued"
        except Cancelled as exc:
            job.state, job.error = "cancelled", str(exc)
        except (KvplanError, ValueError) as exc:
            job.state, job.error = "error", " ".join(str(exc).split())
        except Exception as exc:  # a bug: logged, and the job ends so its client is not stuck
            logging.getLogger("uvicorn.error").exception("job %s failed", job.id)
            job.state, job.error = "error", f"internal error ({type(exc).__name__}); see the log"

    def _queued(self, job: Job, ticket: Ticket) -> bool:
        """While waiting: refresh the place in line; True (leave the line) once cancelled."""
        job.ahead = self.gate.ahead(ticket)
        return job.cancel.is_set()

    def get(self, job_id: str, what: str = "simulate") -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise InputError(f"no {what} job {job_id!r}: start one with POST /api/{what}/jobs "
                             f"(the last {self.keep} finished are kept)")
        return job

    def _trim(self) -> None:
        done = [k for k, j in self._jobs.items() if j.state not in ("queued", "running")]
        for k in done[: max(0, len(self._jobs) - self.keep)]:
            del self._jobs[k]


async def run_now(request: Any, work: Work, what: str) -> dict[str, Any]:
    """``work`` answered at once (GET /api/simulate, /api/plan): it takes its turn in the gate
    the jobs share (503 with Retry-After when full), then runs on a thread of its own; a
    deadline hit is the one-line refusal ``--num-prompts: {what} ...``."""
    def run() -> dict[str, Any]:
        job = Job("sync", "sync", deadline(request.app.state.settings))
        try:
            result, _charts = work(job)
        except Cancelled as exc:
            raise InputError(f"--num-prompts: {what} {exc}") from None
        return result

    return await gated(request.app.state.gate, run)


def start_job(request: Any, client: str | None, work: Work) -> dict[str, Any]:
    """``work`` started as the client's job (one per client); its view to poll."""
    who = client or (request.client.host if request.client else "local")
    view: dict[str, Any] = request.app.state.jobs.start(who, work).view()
    return view
