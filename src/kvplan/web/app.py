"""The FastAPI app: routers for each page family, limits, token, error handlers, static files."""

from __future__ import annotations

from importlib import resources
from typing import Any

from kvplan.web.settings import WebSettings

ROUTERS = ("pages", "routes.model", "routes.request", "routes.capacity", "routes.latency",
           "routes.simulate", "routes.plan", "routes.jobs", "routes.docs")


def create_app(settings: WebSettings | None = None) -> Any:
    """A new app with its own uploads and jobs (tests make one each)."""
    import importlib
    import importlib.util

    from fastapi import FastAPI
    from fastapi.staticfiles import StaticFiles

    from kvplan import __version__
    from kvplan.web import errors
    from kvplan.web.auth import TokenAuth
    from kvplan.web.gate import Gate
    from kvplan.web.jobs import Jobs
    from kvplan.web.limits import BodyGuard
    from kvplan.web.resolve import Uploads

    settings = settings or WebSettings()
    app = FastAPI(title="kvplan", version=__version__,
                  description="kvplan's answers as JSON: the keys of the CLI's --json output, and "
                              "`stderr` (the lines the CLI prints on stderr) when it prints any.",
                  docs_url=None, redoc_url=None)  # /docs: routes/docs.py (offline)
    app.state.settings = settings
    app.state.uploads = Uploads(settings.max_uploads)
    app.state.gate = Gate(settings.max_running_sims, settings.max_queued_sims)
    app.state.jobs = Jobs(app.state.gate, settings.max_sim_seconds)
    errors.install(app)
    for name in ROUTERS:
        if importlib.util.find_spec(f"kvplan.web.{name}") is not None:
            app.include_router(importlib.import_module(f"kvplan.web.{name}").router)
    static = resources.files("kvplan.web") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    app.add_middleware(BodyGuard, max_bytes=settings.max_body_bytes,
                       timeout_s=settings.body_timeout_s)
    if settings.token:  # added last: the outermost layer, so no body is read without it
        app.add_middleware(TokenAuth, token=settings.token)
    return app

