"""The Capacity page family: vLLM's memory budget, blocks, tokens and concurrency on a GPU."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from kvplan.web.build import deployment
from kvplan.web.pages import page
from kvplan.web.queries import CapacityQuery
from kvplan.web.resolve import resolve_gpu, resolve_model

router = APIRouter()


@router.get("/capacity", response_class=HTMLResponse, include_in_schema=False)
def capacity_page(request: Request) -> HTMLResponse:
    return page(request, "capacity")


def _plan(request: Request, q: CapacityQuery) -> Any:
    return _model_plan(request, q)[1]


def _model_plan(request: Request, q: CapacityQuery) -> tuple[Any, Any]:
    from kvplan.costs.memory.plan import plan_resolved

    spec = resolve_model(q.model, request.app.state.uploads)
    return spec, plan_resolved(deployment(q, spec, resolve_gpu(q.gpu)))


@router.get("/api/capacity", tags=["capacity"])
def capacity(request: Request, q: Annotated[CapacityQuery, Query()]) -> dict[str, Any]:
    """`kvplan capacity MODEL --gpu GPU --json`: the budget, blocks, tokens, concurrency, and
    under DP / EP the CLI's ``parallel`` object (per DP rank and fleet totals); ``stderr``: the
    CLI's notes and warnings, when it prints any."""
    from kvplan.costs.memory.given_kv import given_kv_warning
    from kvplan.notes import collected
    from kvplan.report.json_views import plan_json
    from kvplan.report.parallel_view import ep_warning, is_parallel, parallel_json
    from kvplan.web.stderr import lines, with_stderr

    with collected() as notes:
        spec, plan = _model_plan(request, q)
    parallel = is_parallel(plan)
    extra = {"parallel": parallel_json(plan, spec)} if parallel else {}
    # the CLI's stderr: a --kv-cache-memory that cannot sit beside the weights, EP on nothing
    said = lines(notes, given_kv_warning([b for _, b, _ in plan.stages] or [plan.budget],
                                         plan.gpu), ep_warning(plan, spec) if parallel else None)
    return with_stderr({**plan_json(plan), **extra, "ignored_vllm_flags": []}, said)


@router.get("/api/capacity/chart", tags=["charts"])
def capacity_chart(request: Request, q: Annotated[CapacityQuery, Query()]) -> dict[str, Any]:
    """The memory budget as a stacked bar (Vega-Lite), as `kvplan capacity --plot` draws it."""
    from kvplan.report.budget_charts import budget_chart
    from kvplan.report.charts import chart_spec

    return chart_spec(budget_chart(_plan(request, q)))
