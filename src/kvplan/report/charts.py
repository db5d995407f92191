"""Charts (altair, rendered offline by vl-convert): the claim staircase; saving to PNG/SVG/HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvplan.analysis.timeline import RequestTimeline
from kvplan.errors import InputError
from kvplan.report.downsample import downsample
from kvplan.units import MiB

CHART_SUFFIXES = (".png", ".svg", ".html")


def check_chart_path(path: str | Path) -> Path:
    """Validate an output chart's suffix before any work is done (outputs.py checks the rest)."""
    p = Path(path)
    if p.suffix.lower() not in CHART_SUFFIXES:
        raise InputError(f"--plot {p}: use a file name ending in .png, .svg or .html")
    return p


def chart_spec(chart: Any) -> dict[str, Any]:
    """An altair chart's Vega-Lite dict without altair's JSON-schema check at run time (the
    check is about 40 % of a chart's cost, 100 ms of /api/simulate's three; the specs are the
    same dicts, and tests/test_chart_specs.py validates every chart kvplan builds)."""
    spec: dict[str, Any] = chart.to_dict(validate=False)
    return spec


def chart_bytes(chart: Any, suffix: str) -> bytes:
    """An altair chart rendered offline as PNG, SVG or self-contained HTML, by suffix."""
    suffix = suffix.lower()
    if suffix == ".html":
        return str(chart.to_html(inline=True)).encode("utf-8")
    import vl_convert as vlc

    spec = chart.to_json(validate=False)  # validated in tests (chart_spec)
    data = vlc.vegalite_to_png(spec, scale=2) if suffix == ".png" else vlc.vegalite_to_svg(spec)
    return data if isinstance(data, bytes) else data.encode()


def save_chart(chart: Any, path: str | Path) -> Path:
    """Write an altair chart as PNG, SVG or interactive offline HTML, by extension (atomic)."""
    from kvplan.report.outputs import check_output, write_output

    p = check_chart_path(path)
    write_output(check_output(p, "--plot"), chart_bytes(chart, p.suffix))
    return p


LONG_DECODE = 20
"""Decode this many times longer than prefill: a symlog step axis keeps the staircase visible."""
_MAX_MARKS = 200


def staircase_chart(tl: RequestTimeline, model_name: str) -> Any:
    """Bytes held per step: the prefill jump (or chunk staircase), then the decode trickle.

    Drawn from at most ~1,500 points per line (every corner kept, see report/downsample.py);
    phase marks at each prefill chunk and at the last step; a symlog step axis when decode
    is much longer than prefill.
    """
    import altair as alt

    alloc = f"allocated (blocks of {tl.block_size})"
    step, logical, allocated = _staircase_arrays(tl)
    long = len(tl.steps) > LONG_DECODE * max(tl.prefill_steps, 1) and len(tl.steps) > 200
    drawn = downsample(step, {"logical": logical, alloc: allocated}, log_x=long)
    rows = [{"step": int(s), "MiB": float(v), "series": name}
            for name, (x, y) in drawn.items() for s, v in zip(x, y, strict=True)]
    base = alt.Chart(alt.Data(values=rows))  # type: ignore[no-untyped-call]
    scale = alt.Scale(type="symlog") if long else alt.Scale()
    axis = alt.Axis(values=_symlog_ticks(tl)) if long else alt.Axis()
    lines = base.mark_line(interpolate="step-after").encode(
        x=alt.X("step:Q", title="engine step" + (" (symlog axis)" if long else ""), scale=scale,
                axis=axis),
        y=alt.Y("MiB:Q", title=f"KV cache held{_per_gpu(tl)} (MiB)"),
        color=alt.Color("series:N", legend=alt.Legend(title="cache", orient="bottom")),
        strokeDash=alt.StrokeDash("series:N", legend=None),
    )
    marks = alt.Chart(alt.Data(values=_phase_marks(tl))).mark_point(  # type: ignore[no-untyped-call]
        size=30, filled=True).encode(
        x="step:Q", y="MiB:Q",
        shape=alt.Shape("phase:N", legend=alt.Legend(title="phase", orient="right")),
        tooltip=["phase:N", "step:Q", "MiB:Q"],
    )
    title = (
        f"{model_name}: prefill claims {tl.prefill_share:.1%} of the final cache "
        f"({tl.prompt_tokens} prompt + {tl.output_tokens} output tokens)"
    )
    chart = (lines + marks).resolve_legend(color="independent", shape="independent")
    return chart.properties(title=title, width=640, height=320)


def _per_gpu(tl: RequestTimeline) -> str:
    """' per GPU (TP 2)' when the bytes are one GPU's share, else ''."""
    tp = tl.tensor_parallel_size
    return f" per GPU (TP {tp})" if tp > 1 else ""


def _symlog_ticks(tl: RequestTimeline) -> list[int]:
    """0, each decade up to the last step, the end of prefill and the last step."""
    last = len(tl.steps)
    decades = [10**k for k in range(len(str(last))) if 10**k < last]
    return sorted({0, tl.prefill_steps, *decades, last})


def _staircase_arrays(tl: RequestTimeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step 0 (empty) then every step: step number, logical MiB, allocated MiB."""
    step = np.array([0] + [s.step for s in tl.steps], dtype=np.float64)
    logical = np.array([0] + [s.logical_bytes for s in tl.steps], dtype=np.float64) / MiB
    allocated = np.array([0] + [s.allocated_bytes for s in tl.steps], dtype=np.float64) / MiB
    return step, logical, allocated


def _phase_marks(tl: RequestTimeline) -> list[dict[str, Any]]:
    """One mark per prefill chunk (at most _MAX_MARKS), the first decode step and the last."""
    prefill = [s for s in tl.steps if s.phase == "prefill"]
    if len(prefill) > _MAX_MARKS:
        pick = np.linspace(0, len(prefill) - 1, _MAX_MARKS).astype(np.int64)
        prefill = [prefill[int(i)] for i in pick]
    decode = [s for s in tl.steps if s.phase == "decode"]
    chosen = prefill + ([decode[0], decode[-1]] if decode else [])
    return [{"step": s.step, "MiB": s.logical_bytes / MiB, "phase": s.phase} for s in chosen]


def vega_lite_version() -> str:
    """The Vega-Lite version altair writes specs for, as vl-convert names it ('v6.1')."""
    import altair as alt

    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    return f"v{major}.{minor}"
