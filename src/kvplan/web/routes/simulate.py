"""The Simulate page family: a capped serving simulation, as a job with progress and cancel,
or synchronously; both wait their turn at the server's one gate (gate.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import HTMLResponse

from kvplan.errors import InputError
from kvplan.web.build import deployment, disagg_deployment, workload_args
from kvplan.web.jobs import Job, Work
from kvplan.web.pages import page
from kvplan.web.queries import SimulateQuery
from kvplan.web.resolve import resolve_gpu, resolve_model

router = APIRouter()
Client = Annotated[str | None, Header(alias="x-kvplan-client", max_length=64)]


@router.get("/simulate", response_class=HTMLResponse, include_in_schema=False)
def simulate_page(request: Request) -> HTMLResponse:
    return page(request, "simulate")


def _prepare(request: Request, q: SimulateQuery) -> Any:
    """Check everything before a thread starts: names, flags, and the page's request cap."""
    from kvplan.analysis import metrics as mx
    from kvplan.specs.requests.workload import build_workload

    cap = request.app.state.settings.max_sim_requests
    if q.num_prompts is not None and q.num_prompts > cap:
        raise InputError(f"--num-prompts {q.num_prompts}: the page simulates at most {cap} "
                         "requests (kvplan web --max-sim-requests, or use the CLI)")
    wargs = workload_args(q)
    work = build_workload(wargs)
    if len(work) > cap:
        raise InputError(f"--num-prompts: {work.name} holds {len(work)} requests; the page "
                         f"simulates at most {cap} (set --num-prompts)")
    slo = mx.parse_goodput(q.goodput.split() if q.goodput else [])
    stats = (mx.parse_percentile_metrics(q.percentile_metrics),
             mx.parse_percentiles(q.metric_percentiles))
    spec = resolve_model(q.model, request.app.state.uploads)
    hw = resolve_gpu(q.gpu)
    return (deployment(q, spec, hw), wargs, work, slo, stats,
            disagg_deployment(q, spec, hw, resolve_gpu))


def _work(prepared: Any, charts: bool = True) -> Work:
    """The job's body: simulate, then the CLI's JSON and (``charts``: for the page's job) the
    three charts; GET /api/simulate returns the JSON alone and builds none."""
    r, wargs, work, slo, (metrics, pct), dd = prepared
    spec, hw, engine = r.model, r.gpu, r.engine
    if dd is not None:
        return _disagg_work(dd, wargs, work, slo, (metrics, pct), charts)

    def run(job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
        from kvplan.analysis import metrics as mx
        from kvplan.analysis.serving import simulate_resolved
        from kvplan.report.json_views import simulate_json

        ran = simulate_resolved(r, work, progress=job.tick)
        header = ran.header(wargs)
        m = mx.compute_metrics(ran.result, percentile_metrics=metrics, percentiles=pct,
                               goodput_ms=slo or None)
        answer = simulate_json(header, m, ran.result, (spec, hw.id, engine.tensor_parallel_size))
        return answer, _charts(ran.result, header) if charts else {}

    return run


def _disagg_work(dd: Any, wargs: Any, work: Any, slo: dict[str, float],
                 stats: tuple[Any, Any], charts: bool) -> Work:
    """`kvplan simulate --disagg xPyD --json`'s document (the CLI's own functions), and the
    decode pool's first instance's KV usage and the client's latency CDF."""

    def run(job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
        from kvplan.analysis.disagg.answer import disagg_doc, measure

        job.tick(0, len(work))  # the fleet simulator reports no progress: cancel points
        ran, m, dm = measure(dd, work, percentile_metrics=stats[0], percentiles=stats[1],
                             goodput_ms=slo)
        job.tick(len(work), len(work))
        doc = disagg_doc(ran, m, dm, wargs)
        return doc, _disagg_charts(ran, doc) if charts else {}

    return run


def _disagg_charts(ran: Any, doc: dict[str, Any]) -> dict[str, Any]:
    from kvplan.report import sim_charts
    from kvplan.report.charts import chart_spec

    title = f"{doc['model_id']}: decode instance 0 of {doc['disagg']}, KV usage"
    return {"kv_usage": chart_spec(sim_charts.kv_usage_chart(ran.result.decode[0], title)),
            "latency_cdf": chart_spec(sim_charts.latency_cdf_chart(ran.result.client))}


def _charts(r: Any, header: dict[str, Any]) -> dict[str, Any]:
    from kvplan.report import sim_charts
    from kvplan.report.charts import chart_spec

    title = f"{header['model_id']} on {header['gpu']}: KV usage"
    return {"kv_usage": chart_spec(sim_charts.kv_usage_chart(r, title)),
            "queue": chart_spec(sim_charts.queue_chart(r)),
            "latency_cdf": chart_spec(sim_charts.latency_cdf_chart(r))}


@router.get("/api/simulate", tags=["simulate"])
async def simulate(request: Request, q: Annotated[SimulateQuery, Query()]) -> dict[str, Any]:
    """`kvplan simulate MODEL --gpu GPU [workload flags] --json`: takes its turn in the queue the
    jobs share (503 with Retry-After when it is full), then runs on a thread of its own."""
    from kvplan.web.jobs import run_now

    return await run_now(request, _noted_work(request, q, charts=False), "simulation")


@router.post("/api/simulate/jobs", tags=["simulate"])
def start(request: Request, q: SimulateQuery, client: Client = None) -> dict[str, Any]:
    """Start a simulation (one per client); poll GET .../jobs/{job} (routes/jobs.py)."""
    from kvplan.web.jobs import start_job

    return start_job(request, client, _noted_work(request, q))


def _noted_work(request: Request, q: SimulateQuery, charts: bool = True) -> Work:
    """The work, its answer carrying the CLI's notes (``stderr``): those made while the form
    was read (a --goodput metric given twice) and those of the run itself."""
    from kvplan.notes import collected
    from kvplan.web.stderr import noted

    with collected() as early:
        prepared = _prepare(request, q)
    return noted(_work(prepared, charts), early)
