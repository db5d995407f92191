"""The Plan page family: the cheapest configuration that meets an SLO, as a cancellable job."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import HTMLResponse

from kvplan.errors import InputError
from kvplan.web.jobs import Job, Work
from kvplan.web.pages import page
from kvplan.web.queries import PlanQuery
from kvplan.web.resolve import resolve_gpu, resolve_model, served_model_id

router = APIRouter()
Client = Annotated[str | None, Header(alias="x-kvplan-client", max_length=64)]
_PAGE_ONLY = {"trace": None, "trace_columns": None, "prices": None, "profile": None,
              "executor": "local", "ray_address": None, "workers": 1,
              "warmup": 0.1, "goodput_target": None, "burstiness": 1.0,
              "time_scale": 1.0, "random_range_ratio": 0.0, "replicas": "auto",
              "max_gpus": None, "max_cost_per_hour": None, "sample_requests": 500}


@router.get("/plan", response_class=HTMLResponse, include_in_schema=False)
def plan_page(request: Request) -> HTMLResponse:
    return page(request, "plan")


def _args(request: Request, q: PlanQuery) -> dict[str, Any]:
    """The CLI's plan arguments from the form; names checked here (no paths from clients)."""
    _check_size(q, request.app.state.settings.max_sim_requests)
    if q.gpu:
        for name in q.gpu.split(","):
            resolve_gpu(name.strip())
    form = q.model_dump()
    renamed = {"tp": form.pop("tensor_parallel_size"), "pp": form.pop("pipeline_parallel_size"),
               "prefix_caching": form.pop("enable_prefix_caching"),
               "dp": form.pop("data_parallel_size"), "ep": form.pop("enable_expert_parallel")}
    args = {**_PAGE_ONLY, **form, **renamed, "slo": q.slo.split() if q.slo else None,
            "goodput": q.goodput.split() if q.goodput else None,
            "price": q.price.split() if q.price else None,
            "model": resolve_model(q.model, request.app.state.uploads),
            "model_id": served_model_id(q.model)}
    from kvplan.analysis.disagg.side import check_disagg_args

    check_disagg_args(args)  # --kv-link needs --disagg; --disagg needs one offered load
    return args


def _check_size(q: PlanQuery, cap: int) -> None:
    """The page plans over at most ``cap`` requests; without --num-prompts as many as the CLI
    would take (analysis/plan/traffic.py: the dataset's own count, at most its first 10000)."""
    from kvplan.specs.requests.workload import check_dataset

    check_dataset(q.dataset, trace_flag=False)  # the page takes no --trace
    if q.num_prompts is not None:
        if q.num_prompts > cap:
            raise InputError(f"--num-prompts {q.num_prompts}: the page plans over at most {cap}"
                             " requests (kvplan web --max-sim-requests, or use the CLI)")
        return
    from kvplan.analysis.plan.traffic import DEFAULT_PLAN_PROMPTS
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload

    work = build_workload(WorkloadArgs(
        dataset=q.dataset, random_input_len=q.random_input_len,
        random_output_len=q.random_output_len, request_rate=q.request_rate, seed=q.seed))
    if min(len(work), DEFAULT_PLAN_PROMPTS) > cap:
        raise InputError(f"--num-prompts: {work.name} holds {len(work)} requests; the page "
                         f"plans over at most {cap} (set --num-prompts)")


def _work(args: dict[str, Any]) -> Work:
    from kvplan.analysis.plan.args import plan_kwargs, slo_from, workload_from

    slo, workload, kwargs = slo_from(args), workload_from(args), plan_kwargs(args)

    def run(job: Job) -> tuple[dict[str, Any], dict[str, Any]]:
        from kvplan.analysis.plan.planner import plan
        from kvplan.report.charts import chart_spec
        from kvplan.report.plan.plan_chart import pareto_chart
        from kvplan.report.plan.plan_json import plan_json

        def tick(stage: str, done: int, total: int) -> None:
            job.stage = stage
            job.tick(done, total)

        result = plan(args["model"], workload, slo, progress=tick, **kwargs)
        doc = plan_json(result)
        if args["disagg"]:  # `kvplan plan --disagg`: the joint key, as the CLI writes it
            from kvplan.analysis.disagg.joint_doc import joint_json
            from kvplan.analysis.disagg.side import disagg_side

            job.stage = "disaggregated"  # uncounted: the last stage's N / M is not its own
            job.tick(0, 0)
            doc["joint"] = joint_json(disagg_side(args, result))
        return doc, {"pareto": chart_spec(pareto_chart(result))}

    return run


@router.get("/api/plan", tags=["plan"])
async def plan_now(request: Request, q: Annotated[PlanQuery, Query()]) -> dict[str, Any]:
    """`kvplan plan MODEL [flags] --json`: queued with the simulations (503 with Retry-After when
    the queue is full), then run on a thread of its own."""
    from kvplan.web.jobs import run_now

    return await run_now(request, _noted_work(request, q), "plan")


@router.post("/api/plan/jobs", tags=["plan"])
def start(request: Request, q: PlanQuery, client: Client = None) -> dict[str, Any]:
    """Start a plan (one job per client); poll GET /api/simulate/jobs/{job} style endpoints."""
    from kvplan.web.jobs import start_job

    return start_job(request, client, _noted_work(request, q))


def _noted_work(request: Request, q: PlanQuery) -> Work:
    """The plan, its answer carrying the CLI's notes (``stderr``): those made while the form
    was read (a --goodput metric given twice) and those of the search itself."""
    from kvplan.notes import collected
    from kvplan.web.stderr import noted

    with collected() as early:
        work = _work(_args(request, q))
    return noted(work, early)
