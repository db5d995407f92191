"""Jobs started by a page (simulate, plan): progress, result, charts, cancel."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request

from kvplan.errors import InputError

router = APIRouter()
Family = Literal["simulate", "plan"]


@router.get("/api/{family}/jobs/{job_id}", tags=["jobs"])
def status(request: Request, family: Family, job_id: str) -> dict[str, Any]:
    """Progress (done of total, stage), then the CLI's JSON as ``result`` when done."""
    return request.app.state.jobs.get(job_id, family).view()  # type: ignore[no-any-return]


@router.get("/api/{family}/jobs/{job_id}/charts", tags=["charts"])
def charts(request: Request, family: Family, job_id: str) -> dict[str, Any]:
    """The job's charts (Vega-Lite), once it is done."""
    job = request.app.state.jobs.get(job_id, family)
    if job.charts is None:
        raise InputError(f"job {job_id} is {job.state}; charts come when it is done")
    specs: dict[str, Any] = job.charts
    return specs


@router.delete("/api/{family}/jobs/{job_id}", tags=["jobs"])
def cancel(request: Request, family: Family, job_id: str) -> dict[str, Any]:
    """Ask a running job to stop (it stops at its next progress tick)."""
    job = request.app.state.jobs.get(job_id, family)
    job.cancel.set()
    return job.view()  # type: ignore[no-any-return]
