"""Commands for the browser: web (the local page) and report (one self-contained HTML file)."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.app import app
from kvplan.cli.common import console


@app.command("web")
def web_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    max_sim_requests: Annotated[int, typer.Option(
        "--max-sim-requests", help="Requests one page simulation may hold.")] = 2000,
    max_sim_seconds: Annotated[float, typer.Option(
        "--max-sim-seconds", help="Wall time one page simulation may take.")] = 60.0,
) -> None:
    """Serve the web page (Model, Request, Capacity, Latency, Simulate) and its JSON API."""
    from kvplan.errors import InputError
    from kvplan.web.app import serve
    from kvplan.web.settings import WebSettings

    if not 0 < port < 65536:
        raise InputError(f"--port must be in 1..65535, got {port}")
    if max_sim_requests < 1 or max_sim_seconds <= 0:
        raise InputError("--max-sim-requests and --max-sim-seconds must be positive")
    settings = WebSettings(max_sim_requests=max_sim_requests, max_sim_seconds=max_sim_seconds)
    console.print(f"kvplan web: open http://{host}:{port}/ (API docs at /docs); Ctrl-C stops")
    serve(host, port, settings)
