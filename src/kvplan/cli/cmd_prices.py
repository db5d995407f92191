"""The prices command: the bundled $/GPU-hour table (or a provider's rows), with sources."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli.app import app
from kvplan.cli.common import console, print_json

if TYPE_CHECKING:
    from kvplan.specs.prices import PriceRow


@app.command("prices")
def prices_cmd(
    provider: Annotated[str | None, typer.Option("--provider", help="Only this provider.")] = None,
    price: Annotated[list[str] | None, typer.Option("--price", help="GPU=USD per GPU-hour.")]
    = None,
    prices: Annotated[Path | None, typer.Option("--prices", help="Price CSV to read.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """GPU prices per provider and instance shape, each with its source page and date."""
    from kvplan.analysis.plan.args import price_overrides
    from kvplan.report.plan.plan_json import price_row_json
    from kvplan.specs.prices import (
        STALE_AFTER_DAYS,
        bundled_rows,
        load_price_file,
        price_table,
        providers,
    )

    rows = load_price_file(prices) if prices is not None else bundled_rows()
    names = [provider] if provider is not None or price else list(providers(rows))
    overrides = price_overrides(price)  # comma lists too, as kvplan plan reads --price
    tables = [price_table(n, prices_file=prices, overrides=overrides) for n in names]
    shown = [r for t in tables for r in t.rows]
    today = dt.date.today()
    stale = [r for t in tables for r in t.stale_rows(today)]
    if as_json:
        print_json({"rows": [price_row_json(r) for r in shown],
                    "stale_after_days": STALE_AFTER_DAYS,
                    "stale": [f"{r.gpu}@{r.provider}" for r in stale]})
        return
    _render(shown, today)
    for r in stale:
        console.print(f"[yellow]warning:[/yellow] {r.gpu} at {r.provider} observed "
                      f"{r.observed_on} ({r.age_days(today)} days ago)")


def _render(rows: list[PriceRow], today: dt.date) -> None:
    from rich.table import Table

    t = Table(title="GPU prices (USD, on demand)")
    for col in ("provider", "gpu", "instance", "GPUs", "$/instance-h", "$/GPU-h", "observed",
                "source"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.provider, r.gpu, r.instance, str(r.gpus_per_instance),
                  f"{r.usd_per_instance_hour:.2f}", f"{r.usd_per_gpu_hour:.3f}",
                  r.observed_on, r.source_url)
    console.print(t)
