"""Simulations started from the page: off the event loop, capped, one per client, cancellable."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kvplan.errors import InputError, KvplanError


class Cancelled(Exception):
    """Raised inside the simulation's progress callback to stop it."""


class Job:
    """One simulation's live state (read by the polling page, written by its thread)."""

    def __init__(self, job_id: str, client: str, deadline_s: float) -> None:
        self.id, self.client, self.deadline_s = job_id, client, deadline_s
        self.state = "running"
        self.stage: str | None = None
        self.done = self.total = 0
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
        return {"job": self.id, "state": self.state, "stage": self.stage, "done": self.done,
                "total": self.total, "result": self.result, "error": self.error}


def deadline(settings: Any) -> float:
    """When a job started now must stop (monotonic clock)."""
    return time.monotonic() + float(settings.max_sim_seconds)


class Jobs:
    """Running and finished simulations; at most ``max_running`` run at once, one per client."""

    def __init__(self, max_running: int, max_seconds: float, keep: int = 32) -> None:
        self.max_running, self.max_seconds, self.keep = max_running, max_seconds, keep
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def start(self, client: str, work: Callable[[Job], tuple[dict[str, Any], dict[str, Any]]]
              ) -> Job:
        """Run ``work(job)`` on a thread; InputError when this client already runs one."""
        with self._lock:
            running = [j for j in self._jobs.values() if j.state == "running"]
            if any(j.client == client for j in running):
                raise InputError("a simulation is already running for this page; cancel it "
                                 "or wait for it")
            if len(running) >= self.max_running:
                raise InputError(f"the server runs at most {self.max_running} simulations at "
                                 "once; try again shortly")
            job = Job(uuid.uuid4().hex[:12], client, time.monotonic() + self.max_seconds)
            self._jobs[job.id] = job
            self._trim()
        threading.Thread(target=self._run, args=(job, work), daemon=True).start()
        return job

    def _run(self, job: Job, work: Callable[[Job], tuple[dict[str, Any], dict[str, Any]]]
             ) -> None:
        try:
            job.result, job.charts = work(job)
            job.state = "done"
        except Cancelled as exc:
            job.state, job.error = "cancelled", str(exc)
        except (KvplanError, ValueError) as exc:
            job.state, job.error = "error", " ".join(str(exc).split())

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise InputError(f"no simulation {job_id!r} (finished ones are kept a while)")
        return job

    def _trim(self) -> None:
        done = [k for k, j in self._jobs.items() if j.state != "running"]
        for k in done[: max(0, len(self._jobs) - self.keep)]:
            del self._jobs[k]
