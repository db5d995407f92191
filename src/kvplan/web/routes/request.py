"""The Request page family: one request's claim schedule and its staircase chart."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from kvplan.web.pages import page
from kvplan.web.queries import RequestQuery
from kvplan.web.resolve import resolve_model

router = APIRouter()


@router.get("/request", response_class=HTMLResponse, include_in_schema=False)
def request_page(request: Request) -> HTMLResponse:
    return page(request, "request")


def _timeline(request: Request, q: RequestQuery) -> tuple[Any, Any, Any]:
    from kvplan.analysis.kv_view import mla_block_note
    from kvplan.analysis.timeline import request_timeline
    from kvplan.specs.kv import kv_spec
    from kvplan.web.build import cache_engine

    spec = resolve_model(q.model, request.app.state.uploads)
    e = cache_engine(q, spec)
    kv = kv_spec(spec, e.kv_cache_dtype, e.tensor_parallel_size)
    tl = request_timeline(kv, q.prompt, q.output, chunk_tokens=q.chunk, block_size=e.block_size,
                          max_tokens=spec.context_limit)
    mla_block_note(spec, q.block_size)
    return spec, kv, tl


@router.get("/api/request", tags=["request"])
def request_json(request: Request, q: Annotated[RequestQuery, Query()]) -> dict[str, Any]:
    """`kvplan request MODEL --prompt P --output O --json`: the claim schedule."""
    from kvplan.notes import collected
    from kvplan.report.render import timeline_json
    from kvplan.web.stderr import lines, with_stderr

    with collected() as notes:
        spec, kv, tl = _timeline(request, q)
    return with_stderr(timeline_json(spec.name, kv, tl), lines(notes))


@router.get("/api/request/chart", tags=["charts"])
def request_chart(request: Request, q: Annotated[RequestQuery, Query()]) -> dict[str, Any]:
    """The staircase chart `kvplan request --plot` draws (Vega-Lite)."""
    from kvplan.report.charts import chart_spec, staircase_chart

    spec, _kv, tl = _timeline(request, q)
    return chart_spec(staircase_chart(tl, spec.name))
