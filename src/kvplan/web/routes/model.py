"""The Model page family: catalog, GPUs, KV bytes per token, levers, config.json upload."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, Response

from kvplan.errors import InputError
from kvplan.web.build import cache_engine
from kvplan.web.pages import page
from kvplan.web.queries import KvQuery, LeversQuery
from kvplan.web.resolve import resolve_model

router = APIRouter()


@router.get("/model", response_class=HTMLResponse, include_in_schema=False)
def model_page(request: Request) -> HTMLResponse:
    return page(request, "model")


@router.get("/api/models", tags=["model"], response_class=Response)
def models() -> Response:
    """`kvplan models --json`."""
    return Response(_catalog_answer("models"), media_type="application/json")


@router.get("/api/gpus", tags=["model"], response_class=Response)
def gpus() -> Response:
    """`kvplan gpus --json`."""
    return Response(_catalog_answer("gpus"), media_type="application/json")


@cache
def _catalog_answer(which: str) -> bytes:
    """The bundled catalogs do not change while the server runs: built and encoded once, so
    these stay light while simulations hold the CPU."""
    import json

    from kvplan.report.json_views import gpus_json, models_json

    answer = models_json() if which == "models" else gpus_json()
    return json.dumps(answer, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode()


@router.get("/api/kv", tags=["model"])
def kv(request: Request, q: Annotated[KvQuery, Query()]) -> dict[str, Any]:
    """`kvplan kv MODEL --json`: bytes per token, the formula filled in, per layer group."""
    from kvplan.analysis.kv_view import kv_report_for, mla_block_note
    from kvplan.notes import collected
    from kvplan.report.json_views import kv_json
    from kvplan.web.stderr import lines, with_stderr

    with collected() as notes:
        spec = resolve_model(q.model, request.app.state.uploads)
        e = cache_engine(q, spec)
        mla_block_note(spec, q.block_size)  # the hybrid block size is noted by the report
        doc = kv_json(kv_report_for(spec, e.kv_cache_dtype, e.tensor_parallel_size,
                                    e.block_size))
    return with_stderr(doc, lines(notes))


@router.get("/api/levers", tags=["model"])
def levers(request: Request, q: Annotated[LeversQuery, Query()]) -> dict[str, Any]:
    """`kvplan levers MODEL --json`: MHA/GQA/MLA, cache precision and TP, and how they stack."""
    from kvplan.report.json_views import levers_json

    spec = resolve_model(q.model, request.app.state.uploads)
    return levers_json(spec.name, q.batch, q.context, _levers(spec, q))


def _levers(spec: Any, q: LeversQuery) -> Any:
    from kvplan.analysis.footprint import lever_table, servable_tp_degrees

    return lever_table(spec, q.batch, q.context, tp_degrees=servable_tp_degrees(spec))


@router.get("/api/levers/chart", tags=["charts"])
def levers_chart(request: Request, q: Annotated[LeversQuery, Query()]) -> dict[str, Any]:
    """The levers bar chart (Vega-Lite)."""
    from kvplan.report.budget_charts import levers_chart as chart
    from kvplan.report.charts import chart_spec

    spec = resolve_model(q.model, request.app.state.uploads)
    return chart_spec(chart(_levers(spec, q), spec.name))


@router.post("/api/upload", tags=["model"])
async def upload(request: Request, file: UploadFile) -> dict[str, Any]:
    """A config.json for a model outside the catalog -> a token to use as ``model``."""
    raw = await file.read()
    if not raw:
        raise InputError("--config: the uploaded file is empty; upload a config.json")
    token, spec = request.app.state.uploads.add(raw, file.filename or "config.json")
    return {"model": token, "name": spec.name, "attention": spec.attention_kind,
            "layers": spec.num_layers}
