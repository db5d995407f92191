"""The simulate command: capacity plan + step cost model + workload -> simulate -> metrics."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.app import app
from kvplan.cli.common import console, print_json
from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.analysis.metrics import Metrics
    from kvplan.sim.result import SimulationResult

Int = Annotated[int | None, typer.Option()]


def _opt(flag: str, help_: str = "", *alias: str) -> Any:
    return typer.Option(flag, *alias, help=help_)


@app.command("simulate")
def simulate_cmd(
    model: Annotated[str, typer.Argument(help="Catalog id or config.json path.")],
    gpu: Annotated[str, _opt("--gpu", "GPU id from 'kvplan gpus'.")] = "H100",
    tensor_parallel_size: Annotated[int, _opt("--tensor-parallel-size", "", "-tp")] = 1,
    pipeline_parallel_size: Annotated[int, _opt("--pipeline-parallel-size", "", "-pp")] = 1,
    gpu_memory_utilization: Annotated[float, _opt("--gpu-memory-utilization")] = 0.9,
    max_model_len: Annotated[int | None, _opt("--max-model-len")] = None,
    kv_cache_dtype: Annotated[str, _opt("--kv-cache-dtype")] = "auto",
    dtype: Annotated[str, _opt("--dtype")] = "auto",
    quantization: Annotated[str | None, _opt("--quantization", "", "-q")] = None,
    block_size: Annotated[int, _opt("--block-size")] = 16,
    max_num_batched_tokens: Annotated[int | None, _opt("--max-num-batched-tokens")] = None,
    max_num_seqs: Annotated[int | None, _opt("--max-num-seqs")] = None,
    kv_cache_memory: Annotated[str | None, _opt("--kv-cache-memory", "e.g. 24GiB")] = None,
    profile: Annotated[str | None, _opt("--profile", "Profile JSON from 'kvplan calibrate'.")]
    = None,
    prefix_caching: Annotated[bool, typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching")] = True,
    chunked_prefill: Annotated[bool, typer.Option(
        "--enable-chunked-prefill/--no-enable-chunked-prefill")] = True,
    dataset: Annotated[str | None, _opt("--dataset", "random or a bundled trace name.")] = None,
    num_prompts: Annotated[int | None, _opt("--num-prompts")] = None,
    random_input_len: Annotated[int, _opt("--random-input-len")] = 1024,
    random_output_len: Annotated[int, _opt("--random-output-len")] = 128,
    random_range_ratio: Annotated[float, _opt("--random-range-ratio")] = 0.0,
    random_prefix_len: Annotated[int, _opt("--random-prefix-len")] = 0,
    request_rate: Annotated[float | None, _opt("--request-rate", "req/s; inf = all at once")]
    = None,
    burstiness: Annotated[float, _opt("--burstiness")] = 1.0,
    max_concurrency: Annotated[int | None, _opt("--max-concurrency")] = None,
    seed: Annotated[int, _opt("--seed")] = 0,
    time_scale: Annotated[float, _opt("--time-scale")] = 1.0,
    trace: Annotated[Path | None, _opt("--trace", "CSV trace file.")] = None,
    trace_columns: Annotated[str | None, _opt("--trace-columns")] = None,
    goodput: Annotated[list[str] | None, _opt("--goodput", "ttft:MS tpot:MS e2el:MS")] = None,
    percentile_metrics: Annotated[str, _opt("--percentile-metrics")] = "ttft,tpot,itl,e2el",
    metric_percentiles: Annotated[str, _opt("--metric-percentiles")] = "99",
    save_result: Annotated[Path | None, _opt("--save-result", "vllm bench JSON here.")] = None,
    plot: Annotated[Path | None, _opt("--plot", "KV usage chart (.png, .svg or .html).")] = None,
    as_json: Annotated[bool, _opt("--json", "Print one JSON object and nothing else.")] = False,
) -> None:
    """Replay a workload on a simulated vLLM server: TTFT/TPOT/ITL/E2EL, KV usage, preemptions."""
    from kvplan.analysis import metrics as mx
    from kvplan.specs.serving import EngineConfig
    from kvplan.specs.workload import WorkloadArgs
    from kvplan.units import parse_size

    engine = EngineConfig(
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        block_size=block_size, gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, enable_chunked_prefill=chunked_prefill,
        enable_prefix_caching=prefix_caching, kv_cache_dtype=kv_cache_dtype, dtype=dtype,
        quantization=quantization,
        kv_cache_memory_bytes=parse_size(kv_cache_memory) if kv_cache_memory else None,
    )
    wargs = WorkloadArgs(
        dataset=dataset, trace=trace, trace_columns=trace_columns, num_prompts=num_prompts,
        random_input_len=random_input_len, random_output_len=random_output_len,
        random_range_ratio=random_range_ratio, random_prefix_len=random_prefix_len,
        request_rate=request_rate, burstiness=burstiness, max_concurrency=max_concurrency,
        time_scale=time_scale, seed=seed,
    )
    pm = mx.parse_percentile_metrics(percentile_metrics)
    pct = mx.parse_percentiles(metric_percentiles)
    slo = mx.parse_goodput(goodput or [])
    _check_outputs(save_result, plot, trace)
    result, header = run_simulation(model, gpu, engine, wargs, profile, show_progress=not as_json)
    m = mx.compute_metrics(result, percentile_metrics=pm, percentiles=pct, goodput_ms=slo or None)
    doc = mx.save_result_json(result, m, header)
    if save_result is not None:
        import json

        save_result.write_text(json.dumps(doc, indent=2))
    if plot is not None:
        from kvplan.report.sim_charts import kv_usage_chart, save_chart

        save_chart(kv_usage_chart(result, f"{header['model_id']} on {gpu}: KV usage"), plot)
    bands = simulate_bands(model, header["gpu"], engine.tensor_parallel_size, mx.vllm_result(m))
    if as_json:
        print_json({**header, **mx.vllm_result(m), **mx.kvplan_extras(m), **bands,
                    "rejected": doc["rejected"]})
        return
    _render(m, header)
    _render_bands(bands)
    _render_rejections(doc["rejected"])


def simulate_bands(model: str, gpu: str, tp: int, result: dict[str, Any]) -> dict[str, Any]:
    """``*_band`` keys for the mean and median latencies and the output throughput."""
    from kvplan.costs.uncertainty import SIM_KEYS, deployment_bands
    from kvplan.specs.catalog import load_model

    values = {k: result.get(k) for k in SIM_KEYS if k in result}
    return deployment_bands(load_model(model), gpu, tp, values, key_of=SIM_KEYS)


def _render_bands(bands: dict[str, Any]) -> None:
    parts = []
    for key, label, unit in (("mean_ttft_ms", "TTFT", "ms"), ("mean_tpot_ms", "TPOT", "ms"),
                             ("output_throughput", "output throughput", "tok/s")):
        band = bands.get(f"{key}_band")
        if band is not None:
            parts.append(f"{label} {band[0]:,.2f}-{band[1]:,.2f} {unit}")
    if parts:
        console.print(f"band (10-90%, {bands['band_basis']}): " + "; ".join(parts))
    for note in bands["calibration_notes"]:
        console.print(f"note: {note}")


def _check_outputs(save_result: Path | None, plot: Path | None, trace: Path | None) -> None:
    """Never write over the input trace; refuse bad extensions before simulating."""
    for out, flag in ((save_result, "--save-result"), (plot, "--plot")):
        if out is None:
            continue
        if trace is not None and out.resolve() == trace.resolve():
            raise InputError(f"{flag} {out} is the input trace; choose another file")
        if out.is_dir():
            raise InputError(f"{flag} {out} is a directory; give a file name")
    if plot is not None:
        from kvplan.report.charts import check_chart_path

        check_chart_path(plot)


def run_simulation(model: str, gpu: str, engine: Any, wargs: Any, profile: str | None, *,
                   show_progress: bool) -> tuple[SimulationResult, dict[str, Any]]:
    """Simulate through the Python API, with a progress bar on a terminal."""
    from kvplan.analysis.serving import simulate_serving

    with _progress(show_progress and sys.stdout.isatty()) as tick:
        run = simulate_serving(model, gpu, engine, wargs, profile=profile, progress=tick)
    return run.result, run.header(wargs)


class _progress:
    """A rich progress bar over finished requests, shown after ~1 s (terminal only)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.task: Any = None
        self.t0 = 0.0

    def __enter__(self) -> Any:
        import time

        self.t0 = time.perf_counter()
        return self.tick if self.enabled else None

    def tick(self, done: int, total: int) -> None:
        import time

        if self.bar is None and time.perf_counter() - self.t0 > 1.0:
            from rich.progress import Progress

            self.bar = Progress(console=console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("simulating", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _render(m: Metrics, header: dict[str, Any]) -> None:
    from rich.table import Table

    from kvplan.analysis.metrics import p_word

    t = Table(title=f"{header['model_id']} on {header['gpu']}: {header['dataset']}, "
                    f"{header['num_prompts']} requests", show_header=False)
    rows = [
        ("Successful requests", f"{m.completed}"), ("Failed (rejected)", f"{m.failed}"),
        ("Duration (s)", f"{m.duration_s:.2f}"),
        ("Request throughput (req/s)", f"{m.request_throughput:.2f}"),
        ("Output token throughput (tok/s)", f"{m.output_throughput:.2f}"),
        ("Total token throughput (tok/s)", f"{m.total_token_throughput:.2f}"),
    ]
    if m.request_goodput is not None:
        rows.append(("Request goodput (req/s)", f"{m.request_goodput:.2f}"))
    for name, s in m.stats.items():
        rows.append((f"Mean / median {name.upper()} (ms)", f"{s.mean_ms:.2f} / {s.median_ms:.2f}"))
        rows += [(f"P{p_word(p)} {name.upper()} (ms)", f"{v:.2f}") for p, v in s.percentiles_ms]
    rows += [
        ("Preemptions", f"{m.preemptions}"),
        ("Prefix cache hit rate", f"{100 * m.prefix_cache_hit_rate:.1f} %"),
        ("Peak KV blocks", f"{m.peak_kv_blocks} / {m.num_blocks - 1} usable "
                           f"({100 * m.peak_kv_usage:.1f} %)"),
        ("KV claimed by prefill / decode", f"{100 * m.prefill_kv_share:.0f} % / "
                                           f"{100 * m.decode_kv_share:.0f} %"),
        ("Engine steps", f"{m.num_steps}"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    console.print(t)


def _render_rejections(rejected: Any) -> None:
    """Say why requests were rejected (grouped by reason), so a failed run is not silent."""
    if not rejected:
        return
    counts: dict[str, int] = {}
    for entry in rejected:
        counts[entry["reason"]] = counts.get(entry["reason"], 0) + 1
    for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        console.print(f"[yellow]{n} request(s) rejected:[/yellow] {reason}")
