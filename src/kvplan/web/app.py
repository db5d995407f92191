"""The FastAPI app: routers for each page family, limits, error handlers, static files."""

from __future__ import annotations

from importlib import resources
from typing import Any

from kvplan.web.settings import WebSettings

ROUTERS = ("pages", "routes_model", "routes_request", "routes_capacity", "routes_latency",
           "routes_simulate", "routes_plan", "routes_jobs")


def create_app(settings: WebSettings | None = None) -> Any:
    """A new app with its own uploads and jobs (tests make one each)."""
    import importlib
    import importlib.util

    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles

    from kvplan import __version__
    from kvplan.web import errors
    from kvplan.web.jobs import Jobs
    from kvplan.web.limits import BodyLimit
    from kvplan.web.resolve import Uploads

    settings = settings or WebSettings()
    app = FastAPI(title="kvplan", version=__version__,
                  description="kvplan's answers as JSON: the keys of the CLI's --json output.")
    app.state.settings = settings
    app.state.uploads = Uploads(settings.max_uploads)
    app.state.jobs = Jobs(settings.max_running_sims, settings.max_sim_seconds)
    errors.install(app)
    for name in ROUTERS:
        if importlib.util.find_spec(f"kvplan.web.{name}") is not None:
            app.include_router(importlib.import_module(f"kvplan.web.{name}").router)
    static = resources.files("kvplan.web") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app


def serve(host: str, port: int, settings: WebSettings, *, log: bool = True) -> None:
    """Run the app under uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port,
                log_level="info" if log else "warning")
