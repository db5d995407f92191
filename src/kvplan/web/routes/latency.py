"""The Latency page family: TTFT/TPOT/throughput with the bound, and a lever sweep."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from kvplan.web.build import deployment, engine_config
from kvplan.web.pages import page
from kvplan.web.queries import LatencyQuery, SweepQuery
from kvplan.web.resolve import resolve_gpu, resolve_model

router = APIRouter()


@router.get("/latency", response_class=HTMLResponse, include_in_schema=False)
def latency_page(request: Request) -> HTMLResponse:
    return page(request, "latency")


def _inputs(request: Request, q: LatencyQuery,
            resolved: bool = False) -> tuple[Any, Any, Any, Any, Any, Any]:
    """The CLI's inputs; ``resolved``: the deployment resolved once (one answer, no sweep)."""
    from kvplan.costs.step.latency import RequestShape
    from kvplan.costs.step.profiles import profile_for

    spec = resolve_model(q.model, request.app.state.uploads)
    hw = resolve_gpu(q.gpu)
    r = deployment(q, spec, hw) if resolved else None
    engine = engine_config(q, spec) if r is None else r.engine
    shape = RequestShape(batch=q.batch, prompt_tokens=q.prompt, output_tokens=q.output)
    prof = profile_for(spec, hw, engine, None, precision=None if r is None else r.compute_precision)
    return spec, hw, engine, shape, prof, r


@router.get("/api/latency", tags=["latency"])
def latency(request: Request, q: Annotated[LatencyQuery, Query()]) -> dict[str, Any]:
    """`kvplan latency MODEL --gpu GPU --prompt P --output O --json` (under DP / EP with the
    CLI's ``parallel`` object, the ops priced on the fullest DP rank's batch); ``stderr``: the
    CLI's notes and warnings, when it prints any."""
    from kvplan.costs.step.parallel import dp_latency as dpl
    from kvplan.notes import collected
    from kvplan.report.json_views import latency_answer_json
    from kvplan.report.ops_view import ops_view, step_ops_json
    from kvplan.web.stderr import lines, with_stderr

    with collected() as notes:
        spec, hw, engine, shape, prof, r = _inputs(request, q, resolved=True)
        # the KV fit first, as the CLI checks it: the ops of a batch that does not fit are
        # priced over all its prompt tokens in one step (--batch 100000: the server was
        # OOM-killed)
        fleet = dpl.fleet_latency(spec, hw, engine, shape, prof, r)
        dpl.note_waves(hw, engine, fleet.rank_shape.batch)
        basis, steps = ops_view(spec, hw, engine, prof, fleet.rank_shape, r)
    extra = ({"parallel": dpl.parallel_latency_json(spec, engine, fleet.rank_shape)}
             if engine.data_parallel_size > 1 or engine.enable_expert_parallel else {})
    doc = {**latency_answer_json(fleet.result, prof, (spec, hw.id, engine.tensor_parallel_size)),
           **extra, "kernels": basis, "step_ops": step_ops_json(steps)}
    return with_stderr(doc, lines(notes, dpl.ep_no_effect(spec, engine)))


def _sweep(request: Request, q: SweepQuery) -> tuple[str, Any, Any]:
    from kvplan.costs.step import latency as lat
    from kvplan.costs.step.parallel.dp_latency import check_sweep_plain

    spec, hw, engine, shape, prof, _ = _inputs(request, q)
    check_sweep_plain(engine)  # as `kvplan latency --sweep` refuses DP / EP
    lever, values = lat.parse_sweep(q.sweep)
    try:
        rows = lat.sweep(spec, hw, engine, shape, lever, values, prof)
    except ValueError as exc:  # KvplanError too
        from kvplan.errors import InputError
        from kvplan.web.errors import field_of

        if field_of(str(exc)) != lever.replace("-", "_"):
            raise
        # a swept value refused: said of the sweep and put beside it, not beside the fixed
        # field (--batch 16) whose flag the refusal names (--batch ..., got 0)
        raise InputError(f"--sweep {q.sweep}: {exc}") from None
    return lever, rows, (spec, hw.id, engine.tensor_parallel_size)


@router.get("/api/latency/sweep", tags=["latency"])
def latency_sweep(request: Request, q: Annotated[SweepQuery, Query()]) -> dict[str, Any]:
    """`kvplan latency ... --sweep LEVER=V1,V2,... --json`."""
    from kvplan.notes import collected
    from kvplan.report.json_views import sweep_json
    from kvplan.web.stderr import lines, with_stderr

    with collected() as notes:
        lever, rows, deployment = _sweep(request, q)
    return with_stderr(sweep_json(lever, rows, deployment), lines(notes))


@router.get("/api/latency/chart", tags=["charts"])
def latency_chart(request: Request, q: Annotated[SweepQuery, Query()]) -> dict[str, Any]:
    """The sweep chart (Vega-Lite): TPOT and throughput per lever value, the turns marked."""
    from kvplan.report.budget_charts import sweep_chart
    from kvplan.report.charts import chart_spec

    lever, rows, _ = _sweep(request, q)
    return chart_spec(sweep_chart(lever, rows))
