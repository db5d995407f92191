"""Chart render time before and after downsampling, measured in one run (PNG via vl-convert).

"before" draws what the charts drew until issue 10: every engine step as a line point, a phase
mark at every step (request chart), every step of KV usage and up to 5,000 ticks per event kind
(simulate chart). "after" is what `--plot`, the web page and `kvplan report` draw now
(report/downsample.py: corners of every step kept, else per-pixel peaks). Prints seconds and
the ratio. Usage: python benchmarks/bench_charts.py [OUTPUT_TOKENS] [NUM_PROMPTS]
"""

from __future__ import annotations

import sys
import time
from typing import Any

import altair as alt
import numpy as np
import vl_convert as vlc

from kvplan.analysis.serving import simulate_serving
from kvplan.analysis.timeline import RequestTimeline, request_timeline
from kvplan.report.charts import staircase_chart
from kvplan.report.sim_charts import kv_usage_chart
from kvplan.sim.result import SimulationResult
from kvplan.specs.catalog import load_model
from kvplan.specs.kv import kv_spec
from kvplan.specs.requests.workload import WorkloadArgs
from kvplan.units import MiB

MODEL = "meta-llama/Llama-3.1-8B"


def naive_staircase(tl: RequestTimeline) -> Any:
    """The pre-issue-10 request chart: all steps, both series, a mark per step."""
    rows = []
    for s in tl.steps:
        rows.append({"step": s.step, "MiB": s.logical_bytes / MiB, "series": "logical",
                     "phase": s.phase})
        rows.append({"step": s.step, "MiB": s.allocated_bytes / MiB, "series": "allocated",
                     "phase": s.phase})
    base = alt.Chart(alt.Data(values=rows))
    lines = base.mark_line(interpolate="step-after").encode(x="step:Q", y="MiB:Q",
                                                            color="series:N")
    points = base.transform_filter(alt.datum.series == "logical").mark_point(size=18).encode(
        x="step:Q", y="MiB:Q", shape="phase:N")
    return (lines + points).properties(width=640, height=320)


def naive_usage(r: SimulationResult) -> Any:
    """The pre-issue-10 simulate chart: 4,000 usage points, 5,000 ticks per event kind."""
    t = r.steps.start_s
    used = 100.0 * r.steps.used_blocks / r.usable_blocks
    if len(t) > 4000:
        edges = np.linspace(0, len(t), 4001).astype(np.int64)[:-1]
        t, used = t[edges], np.maximum.reduceat(used, edges)
    rows = [{"t": float(a), "u": float(b)} for a, b in zip(t, used, strict=True)]
    line = alt.Chart(alt.Data(values=rows)).mark_line(interpolate="step-after").encode(
        x="t:Q", y="u:Q")
    sent = r.sent_s[~np.isnan(r.sent_s)]
    if len(sent) > 5000:
        sent = np.quantile(sent, np.linspace(0, 1, 5000))
    ticks = alt.Chart(alt.Data(values=[{"t": float(x), "y": 0.0} for x in sent])
                      ).mark_tick().encode(x="t:Q", y="y:Q")
    return alt.layer(line, ticks).properties(width=720, height=300)


def png_seconds(chart: Any) -> float:
    spec = chart.to_json()
    t0 = time.perf_counter()
    vlc.vegalite_to_png(spec, scale=2)
    return time.perf_counter() - t0


def report(name: str, before: float, after: float) -> None:
    print(f"{name:34s} before {before:7.2f} s   after {after:6.3f} s   {before / after:6.1f}x")


def main() -> None:
    args = sys.argv[1:]
    if any(not a.isdigit() for a in args) or len(args) > 2:
        print(__doc__)
        sys.exit(0 if args in (["--help"], ["-h"]) else 2)
    output = int(args[0]) if args else 30_000
    prompts = int(args[1]) if len(args) > 1 else 5_000
    tl = request_timeline(kv_spec(load_model(MODEL)), 2048, output, chunk_tokens=512)
    report(f"request chart, {len(tl.steps):,} steps", png_seconds(naive_staircase(tl)),
           png_seconds(staircase_chart(tl, MODEL)))
    run = simulate_serving(MODEL, "H100", workload=WorkloadArgs(
        num_prompts=prompts, request_rate=10, random_input_len=1024, random_output_len=256))
    r = run.result
    report(f"simulate chart, {r.num_steps:,} steps", png_seconds(naive_usage(r)),
           png_seconds(kv_usage_chart(r, "KV usage")))


if __name__ == "__main__":
    main()
