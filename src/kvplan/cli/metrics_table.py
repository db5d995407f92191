"""The `vllm bench serve`-style metrics table of a simulation, printed (report/views/metrics.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.cli.common import console

if TYPE_CHECKING:
    from kvplan.analysis.metrics import Metrics


def render_metrics(m: Metrics, header: dict[str, Any], *, kv_rows: bool = True) -> None:
    """The `vllm bench serve`-style table; ``kv_rows``: one server's KV rows too."""
    from kvplan.report.views.metrics import metrics_table

    console.print(metrics_table(m, header, kv_rows=kv_rows))
