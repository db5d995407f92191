"""HTML pages (thin templates over the JSON API) and the offline chart bundle."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

router = APIRouter()

PAGES = (("model", "Model"), ("request", "Request"), ("capacity", "Capacity"),
         ("latency", "Latency"), ("simulate", "Simulate"), ("plan", "Plan"))
KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e5m2", "int8_per_token_head",
             "fp8_per_token_head", "nvfp4")


@cache
def _templates() -> Any:
    from fastapi.templating import Jinja2Templates

    return Jinja2Templates(directory=str(resources.files("kvplan.web") / "templates"))


@cache
def choices() -> dict[str, Any]:
    """What the forms offer: catalog models, GPUs, cache dtypes, bundled datasets."""
    from kvplan.specs.catalog import catalog
    from kvplan.specs.hardware import gpu_catalog, load_gpu
    from kvplan.specs.links import link_catalog
    from kvplan.specs.prices import DEFAULT_PROVIDER, bundled_rows, providers
    from kvplan.specs.requests.workload import dataset_names
    from kvplan.specs.serving import ALL2ALL_BACKENDS, VLLM_BLOCK_SIZES

    return {
        "models": sorted(e.hf_id for e in catalog().values()),
        "gpus": [g.id for g in gpu_catalog().values()],
        "default_gpu": load_gpu("H100").id,
        "kv_dtypes": KV_DTYPES,
        "block_sizes": list(VLLM_BLOCK_SIZES),  # every --block-size vLLM takes
        "datasets": dataset_names(),
        "links": [x.id for x in link_catalog()],
        "all2all": [b for b in ALL2ALL_BACKENDS if b != "deepep"],  # deepep: an old alias
        "providers": providers(bundled_rows()), "default_provider": DEFAULT_PROVIDER,
    }


def page(request: Request, name: str, **extra: Any) -> HTMLResponse:
    """Render one page: nav, its form (vLLM flag names), empty result areas for app.js."""
    ctx = {"page": name, "pages": PAGES, "plan_ready": plan_available(), **choices(), **extra}
    return _templates().TemplateResponse(request, f"{name}.html", ctx)  # type: ignore[no-any-return]


def plan_available() -> bool:
    """True once the planner (``kvplan.plan``) is installed."""
    import importlib.util

    return importlib.util.find_spec("kvplan.analysis.plan.planner") is not None


@router.get("/", include_in_schema=False)
def index(request: Request) -> RedirectResponse:
    """The Model page, with the link's query kept: its form reads the question from the URL."""
    query = request.url.query
    return RedirectResponse("/model" + (f"?{query}" if query else ""))


@router.get("/static/vega-bundle.js", include_in_schema=False)
def bundle() -> Response:
    from kvplan.report.html import vega_bundle

    return Response(vega_bundle(), media_type="text/javascript",
                    headers={"cache-control": "max-age=86400"})


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> Response:
    return Response(status_code=204)
