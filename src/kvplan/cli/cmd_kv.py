"""Commands about the model and its cache: models, kv, request, batch, levers."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.app import app
from kvplan.cli.common import console, print_json

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")]


@app.command("models")
def models_cmd(as_json: JsonOpt = False) -> None:
    """List the bundled model catalog (Hugging Face ids, attention kind, cache per token)."""
    from kvplan.analysis.catalog_view import catalog_rows
    from kvplan.report.tables import models_table

    rows = catalog_rows()
    if as_json:
        print_json({"models": [r._asdict() for r in rows]})
        return
    console.print(models_table(rows))
