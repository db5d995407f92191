"""Charts (altair, rendered offline by vl-convert): the claim staircase; saving to PNG/SVG/HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.analysis.timeline import RequestTimeline
from kvplan.errors import InputError
from kvplan.units import MiB

CHART_SUFFIXES = (".png", ".svg", ".html")


def check_chart_path(path: str | Path) -> Path:
    """Validate an output chart's suffix before any work is done (outputs.py checks the rest)."""
    p = Path(path)
    if p.suffix.lower() not in CHART_SUFFIXES:
        raise InputError(f"--plot {p}: use a file name ending in .png, .svg or .html")
    return p


def chart_bytes(chart: Any, suffix: str) -> bytes:
    """An altair chart rendered offline as PNG, SVG or self-contained HTML, by suffix."""
    suffix = suffix.lower()
    if suffix == ".html":
        return str(chart.to_html(inline=True)).encode("utf-8")
    import vl_convert as vlc

    spec = chart.to_json()
    data = vlc.vegalite_to_png(spec, scale=2) if suffix == ".png" else vlc.vegalite_to_svg(spec)
    return data if isinstance(data, bytes) else data.encode()


def save_chart(chart: Any, path: str | Path) -> Path:
    """Write an altair chart as PNG, SVG or interactive offline HTML, by extension (atomic)."""
    from kvplan.report.outputs import check_output, write_output

    p = check_chart_path(path)
    write_output(check_output(p, "--plot"), chart_bytes(chart, p.suffix))
    return p


def staircase_chart(tl: RequestTimeline, model_name: str) -> Any:
    """Bytes held per step: the prefill jump (or chunk staircase), then the decode trickle."""
    import altair as alt

    rows = [
        {"step": 0, "MiB": 0.0, "series": name, "phase": "start"}
        for name in ("logical", f"allocated (blocks of {tl.block_size})")
    ]
    for s in tl.steps:
        rows.append(
            {"step": s.step, "MiB": s.logical_bytes / MiB, "series": "logical", "phase": s.phase}
        )
        rows.append(
            {
                "step": s.step,
                "MiB": s.allocated_bytes / MiB,
                "series": f"allocated (blocks of {tl.block_size})",
                "phase": s.phase,
            }
        )
    base = alt.Chart(alt.Data(values=rows))  # type: ignore[no-untyped-call]
    lines = base.mark_line(interpolate="step-after").encode(
        x=alt.X("step:Q", title="engine step"),
        y=alt.Y("MiB:Q", title="KV cache held (MiB)"),
        color=alt.Color("series:N", legend=alt.Legend(title="cache", orient="bottom")),
        strokeDash=alt.StrokeDash("series:N", legend=None),
    )
    points = (
        base.transform_filter(alt.datum.series == "logical")
        .mark_point(size=18)
        .encode(
            x="step:Q",
            y="MiB:Q",
            shape=alt.Shape("phase:N", legend=alt.Legend(title="phase", orient="right")),
        )
    )
    title = (
        f"{model_name}: prefill claims {tl.prefill_share:.1%} of the final cache "
        f"({tl.prompt_tokens} prompt + {tl.output_tokens} output tokens)"
    )
    chart = (lines + points).resolve_legend(color="independent", shape="independent")
    return chart.properties(title=title, width=640, height=320)
