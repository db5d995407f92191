"""`kvplan simulate`'s work, without typer: flags (typer's or fast/simulate_args.py's parse, the
same dict) -> capacity plan + step cost model + workload -> simulate -> metrics -> output."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.cli.common import check_output, console, print_json, rich_console, write_output
from kvplan.cli.fast import gc_pause
from kvplan.cli.fast.flag_table import engine_settings
from kvplan.errors import InputError

if TYPE_CHECKING:
    from kvplan.analysis.metrics import Metrics
    from kvplan.report.outputs import OutputTarget
    from kvplan.sim.result import SimulationResult
    from kvplan.specs.model import ModelSpec

WORKLOAD_FIELDS = (
    "dataset", "trace", "trace_columns", "num_prompts", "random_input_len", "random_output_len",
    "random_range_ratio", "random_prefix_len", "request_rate", "burstiness", "max_concurrency",
    "time_scale", "seed",
)
DISAGG_FLAGS = ("disagg", "prefill_gpu", "decode_gpu", "prefill_tp", "decode_tp",
                "prefill_instances", "decode_instances", "kv_link", "prefill_dp", "decode_dp",
                "router")
"""cmd_simulate_disagg's fields and --router (a test checks them): any given -> its module."""


def run_simulate(given: dict[str, Any]) -> None:
    """Replay a workload on a simulated vLLM server; ``given`` holds every simulate parameter
    by name (typer's values: defaults filled in, paths as Path; ``model_and_args``: MODEL
    and / or a pasted vLLM line, fast/pasted_args.py)."""
    from kvplan.analysis import metrics as mx
    from kvplan.cli.engine import resolve_engine
    from kvplan.cli.fast.pasted_args import read_command_line
    from kvplan.specs.requests.workload import WorkloadArgs

    line = read_command_line(given["model_and_args"] or [], {**engine_settings(given), **{
        k: given[k] for k in ("all2all_backend", "expert_imbalance", "mxfp4_moe_backend")
        if given[k] is not None}}, prices_steps=True)
    line.note_ignored()
    settings = line.settings
    wargs = WorkloadArgs(**{k: given[k] for k in WORKLOAD_FIELDS})
    save_result, plot = given["save_result"], given["plot"]
    _check_detailed(given["save_detailed"], save_result)
    pm = mx.parse_percentile_metrics(given["percentile_metrics"])
    pct = mx.parse_percentiles(given["metric_percentiles"])
    slo = mx.parse_goodput(given["goodput"] or [])
    outs = _check_outputs(save_result, plot, (line.model, given["gpu"], given["profile"],
                                              given["trace"]))
    spec, layout = line.load()
    if any(given.get(k) is not None for k in DISAGG_FLAGS):
        from kvplan.cli import cmd_simulate_disagg as dg
        from kvplan.cli.metrics_table import render_metrics

        if dg.disagg_given(given):
            gc_pause.resume()  # the fleet loop runs in Python
            dg.run_disagg(given, spec, settings, wargs, (pm, pct, slo), outs[0],
                          given["as_json"], render_metrics)
            return
    _one_server(given, (spec, layout), resolve_engine(settings), wargs, (pm, pct, slo), outs)


def _one_server(given: dict[str, Any], models: tuple[ModelSpec, ModelSpec], engine: Any,
                wargs: Any,
                opts: tuple[Any, Any, dict[str, float]],
                outs: tuple[OutputTarget | None, OutputTarget | None]) -> None:
    """An aggregated server: simulate, write the outputs, print JSON or the text view;
    ``models``: the model and the model as vLLM lays out its KV cache (pasted_args)."""
    from kvplan.analysis import metrics as mx
    from kvplan.report.json_views import simulate_bands, simulate_json

    pm, pct, slo = opts
    spec, layout = models
    gpu, as_json = given["gpu"], given["as_json"]
    result, header = run_simulation(spec, gpu, engine, wargs, given["profile"],
                                    show_progress=not as_json,
                                    kv_layout=None if layout is spec else layout)
    m = mx.compute_metrics(result, percentile_metrics=pm, percentiles=pct, goodput_ms=slo or None)
    doc = None if outs[0] is None else _save_doc(result, m, header, given["save_detailed"])
    _write_outputs(doc, result, header, gpu, outs, as_json)
    deployment = (spec, header["gpu"], engine.tensor_parallel_size)
    if as_json:
        print_json(simulate_json(header, m, result, deployment))
        return
    from kvplan.cli.metrics_table import render_metrics
    from kvplan.report.views.metrics import run_lines

    render_metrics(m, header)
    for line in run_lines(result, header, simulate_bands(deployment, mx.vllm_result(m))):
        console.print(line)  # the DP ranks, rejections, overload and band, as the notebook


def _check_detailed(save_detailed: bool, save_result: Path | None) -> None:
    if save_detailed and save_result is None:
        raise InputError("--save-detailed adds the per-request lists to --save-result FILE; "
                         "give --save-result too")


def _save_doc(result: SimulationResult, m: Metrics, header: dict[str, Any],
              detailed: bool) -> dict[str, Any]:
    """The --save-result document (built only when asked): vLLM's summary keys, kvplan's,
    the verdicts, and with --save-detailed the per-request lists."""
    from kvplan.analysis.metrics import save_result_json
    from kvplan.report.json_views import simulate_verdicts

    return {**save_result_json(result, m, header, detailed=detailed, flat_itls=True),
            **simulate_verdicts(result)}


def _write_outputs(doc: dict[str, Any] | None, result: SimulationResult, header: dict[str, Any],
                   gpu: str, outs: tuple[OutputTarget | None, OutputTarget | None],
                   as_json: bool) -> None:
    save_out, plot_out = outs
    if save_out is not None and doc is not None:
        from kvplan.report.json_out import dumps_chunks

        write_output(save_out, dumps_chunks(doc), as_json=as_json)
    if plot_out is not None:
        from kvplan.report.charts import chart_bytes
        from kvplan.report.sim_charts import kv_usage_chart

        chart = kv_usage_chart(result, f"{header['model_id']} on {gpu}: KV usage")
        write_output(plot_out, chart_bytes(chart, plot_out.path.suffix), as_json=as_json)


def _check_outputs(save_result: Path | None, plot: Path | None, inputs: tuple[Any, ...]) -> (
        tuple[OutputTarget | None, OutputTarget | None]):
    """Refuse bad output paths (an input, a folder, unwritable...) before simulating."""
    if plot is not None:
        from kvplan.report.charts import check_chart_path

        check_chart_path(plot)
    save_out = check_output(save_result, "--save-result", inputs)
    plot_out = check_output(plot, "--plot", inputs)
    if save_out is not None and plot_out is not None and save_out.target == plot_out.target:
        raise InputError("--save-result and --plot name the same file; give two file names")
    return save_out, plot_out


def run_simulation(model: str | ModelSpec, gpu: str, engine: Any, wargs: Any,
                   profile: str | None, *, show_progress: bool,
                   kv_layout: ModelSpec | None = None) -> tuple[SimulationResult, dict[str, Any]]:
    """Simulate through the Python API, with a progress bar on a terminal."""
    from kvplan.analysis.serving import simulate_serving
    from kvplan.costs.memory.given_kv import plan_warnings

    with _progress(show_progress and sys.stdout.isatty()) as tick:
        run = simulate_serving(model, gpu, engine, wargs, profile=profile, progress=tick,
                               kv_layout=kv_layout)
    for warning in plan_warnings(run.plan):  # a given --kv-cache-memory vLLM cannot start
        print(warning, file=sys.stderr)
    gc_pause.resume()  # off since fast/entry.main: the imports and set-up made no cycles
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

            self.bar = Progress(console=rich_console(), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("simulating", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
