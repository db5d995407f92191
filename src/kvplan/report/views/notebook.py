"""Jupyter / IPython display: kvplan's answers shown as its CLI prints them, in HTML.

In a notebook ``import kvplan`` registers these formatters (``enable``), so the last value of
a cell shows itself: a ``MemoryPlan`` (``kvplan.plan_memory``) as `kvplan capacity`'s table
and vLLM's lines (a DP / EP plan's per-rank and fleet lines too), a ``Plan`` (``kvplan.plan``)
as `kvplan plan`'s answer, a ``ServingRun`` (``kvplan.simulate_serving``) as `kvplan
simulate`'s metrics table and the lines under it (DP ranks, rejections, an overload warning,
the calibration band), a ``LatencyResult``
(``kvplan.request_latency``) as its TTFT / TPOT / E2E table, and a ``RequestTimeline``
(``kvplan.request_timeline``) as the claim staircase (an inline SVG chart) above its table
and `kvplan request`'s totals (prefill, final cache, where vLLM's request ends), a ``ModelKv``
(``kvplan.kv_spec``) as `kvplan kv`'s formula, bytes per token and layer groups, and a
``BatchFootprint`` (``kvplan.batch_footprint``) as `kvplan batch`'s equation and total.
``html(obj)`` returns the same HTML anywhere. The formatters are registered by type name, so
nothing heavy is imported until a value is shown, and everything renders offline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_PRE = ("<pre style=\"font-family:Menlo,'DejaVu Sans Mono',consolas,monospace;"
        "font-size:12px;line-height:1.35\">{code}</pre>")
WIDTH = 120
"""Columns the rich tables are laid out in (a notebook cell's usual width)."""


def enable(shell: Any = None) -> bool:
    """Register the HTML formatters on ``shell`` (default: the running IPython shell);
    False where there is none (plain Python, or IPython imported but not running)."""
    if shell is None:
        shell = _running_shell()
    if shell is None:
        return False
    formatter = shell.display_formatter.formatters["text/html"]
    for (module, name), render in _RENDERERS.items():
        formatter.for_type_by_name(module, name, render)
    return True


def html(obj: Any) -> str:
    """``obj`` as the HTML a notebook shows for it; TypeError for a type kvplan does not
    render (the registered types: ``RENDERED``)."""
    key = (type(obj).__module__, type(obj).__name__)
    if key not in _RENDERERS:
        raise TypeError(f"kvplan renders no {type(obj).__name__}; it renders "
                        f"{', '.join(name for _, name in _RENDERERS)}")
    return _RENDERERS[key](obj)


def _running_shell() -> Any:
    import sys

    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return get() if get is not None else None


def _recording() -> Any:
    """A rich console that records what is printed to it, laid out ``WIDTH`` columns wide."""
    import io

    from rich.console import Console

    return Console(record=True, width=WIDTH, file=io.StringIO(), color_system="truecolor")


def _export(items: list[Any]) -> str:
    """Rich renderables (and plain lines, printed without markup) as one HTML block."""
    console = _recording()
    for item in items:
        if isinstance(item, str):
            console.print(item, markup=False, highlight=False)
        else:
            console.print(item)
    return str(console.export_html(inline_styles=True, code_format=_PRE))


def _capacity(plan: Any) -> str:
    from kvplan.report.parallel_view import is_parallel, parallel_lines
    from kvplan.report.views.capacity import capacity_renderables

    items = capacity_renderables(plan)
    if plan.spec is not None and is_parallel(plan):  # DP ranks / EP, as `kvplan capacity`
        items += parallel_lines(plan, plan.spec)
    return _export(items)


def _plan(p: Any) -> str:
    from kvplan.report.plan.plan_text import render_plan

    console = _recording()
    render_plan(p, console)  # `kvplan plan`'s own printing, recorded
    return str(console.export_html(inline_styles=True, code_format=_PRE))


def _serving(run: Any) -> str:
    from kvplan.analysis.metrics import compute_metrics, vllm_result
    from kvplan.report.json_views import simulate_bands
    from kvplan.report.views.metrics import CLI_PERCENTILE_METRICS, metrics_table, run_lines

    header = run.header()  # with a DP fleet's ranks
    m = compute_metrics(run.result, percentile_metrics=CLI_PERCENTILE_METRICS)
    bands = simulate_bands((run.model, run.hardware.id, run.engine.tensor_parallel_size),
                           vllm_result(m))
    return _export([metrics_table(m, header), *run_lines(run.result, header, bands)])


def _latency(r: Any) -> str:
    from rich.table import Table

    from kvplan.units import fmt_seconds

    s = r.shape
    t = Table(title=f"batch {s.batch}, prompt {s.prompt_tokens} tokens, output "
                    f"{s.output_tokens} tokens")
    t.add_column("metric")
    t.add_column("value", justify="right")
    t.add_row("TTFT", fmt_seconds(r.ttft_s))
    t.add_row("TPOT", "-" if r.tpot_s is None else fmt_seconds(r.tpot_s))
    t.add_row("end-to-end", fmt_seconds(r.e2e_s))
    t.add_row("output throughput", f"{r.output_throughput_tok_s:,.0f} tok/s")
    t.add_row("prefill bound", str(r.prefill_bound))
    t.add_row("decode bound", "-" if r.decode_bound is None else str(r.decode_bound))
    return _export([t])


def _timeline(tl: Any) -> str:
    from kvplan.report.charts import chart_bytes, staircase_chart
    from kvplan.report.render import timeline_lines
    from kvplan.report.tables import timeline_table

    svg = chart_bytes(staircase_chart(tl, "one request"), ".svg").decode("utf-8")
    return f"<div>{svg}</div>" + _export([timeline_table(tl), *timeline_lines(tl)])


def _kv(kv: Any) -> str:
    from kvplan.analysis.timeline import hybrid_block_layout
    from kvplan.report.explain import kv_summary_lines
    from kvplan.report.tables import kv_groups_table

    head = (f"{kv.model}, KV cache dtype {kv.precision.name}, tp {kv.tensor_parallel_size} "
            "(per GPU)")
    pages, block = hybrid_block_layout(kv, 16)  # the block vLLM runs, as `kvplan kv` shows
    return _export([head, *kv_summary_lines(kv), kv_groups_table(pages, block)])


def _batch(fp: Any) -> str:
    from kvplan.report.render import render_batch

    console = _recording()
    render_batch(console, fp.kv.model, fp)  # `kvplan batch`'s own printing, recorded
    return str(console.export_html(inline_styles=True, code_format=_PRE))


_RENDERERS: dict[tuple[str, str], Callable[[Any], str]] = {
    ("kvplan.costs.memory.plan", "MemoryPlan"): _capacity,
    ("kvplan.analysis.plan.records", "Plan"): _plan,
    ("kvplan.analysis.serving", "ServingRun"): _serving,
    ("kvplan.costs.step.latency", "LatencyResult"): _latency,
    ("kvplan.analysis.timeline", "RequestTimeline"): _timeline,
    ("kvplan.specs.kv", "ModelKv"): _kv,
    ("kvplan.analysis.footprint", "BatchFootprint"): _batch,
}
RENDERED = tuple(name for _, name in _RENDERERS)
"""The types ``html`` and the notebook render."""
