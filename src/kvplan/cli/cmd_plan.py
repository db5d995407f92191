"""The plan command: search GPU type, parallelism, precision, limits and replicas for the
cheapest configuration that meets an SLO; the analysis is kvplan.plan(), this only renders."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.common import console, print_json, rich_console

Str = str | None
INFEASIBLE = 1
"""Exit status when nothing in the space meets the SLO (bad input is 2)."""


def _o(*names: str, help_: str = "") -> Any:
    return typer.Option(*names, help=help_)


NUM_HELP = "default: a trace's first 10000; random, sharegpt: 1000"
"""--num-prompts' default (analysis.plan.traffic.DEFAULT_PLAN_PROMPTS; the datasets' own)."""
TARGET_HELP = "share meeting --goodput (default 0.99)"
DisaggO = Annotated[bool, _o("--disagg", help_="also search xPyD prefill/decode fleets")]
LinkO = Annotated[Str, _o("--kv-link", help_="their KV link (default ib-ndr)")]
DpO = Annotated[Str, _o("--data-parallel-size", "-dp",
                        help_="MoE: e.g. 1,2,4,8 (default: those within one node)")]
EpO = Annotated[Str, _o("--enable-expert-parallel",
                        help_="MoE: on,off (default: both when DP > 1, off at DP 1)")]


@app.command("plan")
def plan_cmd(
    model: Annotated[str, typer.Argument(help="Catalog id or config.json path.")],
    gpu: Annotated[Str, _o("--gpu", help_="Comma list (default: every GPU with a price).")] = None,
    tp: Annotated[Str, _o("--tensor-parallel-size", "-tp", help_="e.g. 1,2,4,8")] = None,
    pp: Annotated[str, _o("--pipeline-parallel-size", "-pp")] = "1",
    kv_cache_dtype: Annotated[str, _o("--kv-cache-dtype", help_="e.g. auto,fp8")] = "auto",
    quantization: Annotated[str, _o("--quantization", "-q", help_="none,fp8,...")] = "none",
    max_num_seqs: Annotated[str, _o("--max-num-seqs", help_="e.g. 128,256,default")] = "default",
    max_num_batched_tokens: Annotated[Str, _o("--max-num-batched-tokens")] = None,
    block_size: Annotated[str, _o("--block-size")] = "16",
    prefix_caching: Annotated[str, _o("--enable-prefix-caching", help_="on,off")] = "on",
    gpu_memory_utilization: Annotated[float, _o("--gpu-memory-utilization")] = 0.9,
    max_model_len: Annotated[Str, _o("--max-model-len", help_="8192, 8k, 8K")] = None,
    replicas: Annotated[str, _o("--replicas", help_="auto or N")] = "auto",
    router: Annotated[str, _o("--router", help_="round-robin, least-outstanding, "
                                                "prefix-affinity")] = "round-robin",
    max_gpus: Annotated[int | None, _o("--max-gpus")] = None,
    max_cost_per_hour: Annotated[float | None, _o("--max-cost-per-hour")] = None,
    dataset: Annotated[Str, _o("--dataset", help_="random or a bundled trace")] = None,
    trace: Annotated[Str, _o("--trace", help_="CSV or JSONL trace file.")] = None,
    trace_columns: Annotated[Str, _o("--trace-columns")] = None,
    num_prompts: Annotated[int | None, _o("--num-prompts", help_=NUM_HELP)] = None,
    random_input_len: Annotated[int, _o("--random-input-len")] = 1024,
    random_output_len: Annotated[int, _o("--random-output-len")] = 128,
    random_range_ratio: Annotated[float, _o("--random-range-ratio")] = 0.0,
    request_rate: Annotated[float | None, _o("--request-rate", help_="fleet req/s")] = None,
    burstiness: Annotated[float, _o("--burstiness")] = 1.0,
    time_scale: Annotated[float, _o("--time-scale")] = 1.0,
    seed: Annotated[int, _o("--seed", help_="0 .. 2**32 - 1: drawn lengths and arrivals")] = 0,
    slo: Annotated[list[str] | None, _o("--slo", help_="ttft:p99:2000 tpot:p90:50 ...")] = None,
    goodput: Annotated[list[str] | None, _o("--goodput", help_="ttft:MS tpot:MS e2el:MS")] = None,
    goodput_target: Annotated[float | None, _o("--goodput-target", help_=TARGET_HELP)] = None,
    warmup: Annotated[float, _o("--warmup-fraction", help_="requests not judged")] = 0.1,
    slo_margin: Annotated[str, _o("--slo-margin", help_="none; band: SLO at band edge")] = "none",
    provider: Annotated[Str, _o("--provider", help_="see 'kvplan prices'")] = None,
    price: Annotated[list[str] | None, _o("--price", help_="GPU=USD per GPU-hour")] = None,
    prices: Annotated[Path | None, _o("--prices", help_="price CSV (see docs)")] = None,
    search: Annotated[str, _o("--search", help_="funnel or exhaustive")] = "funnel",
    executor: Annotated[str, _o("--executor", help_="auto, local or ray")] = "auto",
    ray_address: Annotated[Str, _o("--ray-address")] = None,
    workers: Annotated[int | None, _o("--workers", help_="local worker processes")] = None,
    sample_requests: Annotated[int, _o("--sample-requests")] = 500,
    profile: Annotated[Str, _o("--profile", help_="profile JSON from 'kvplan calibrate'")] = None,
    plot: Annotated[Path | None, _o("--plot", help_="Pareto chart .png/.svg/.html")] = None,
    as_json: Annotated[bool, _o("--json", help_="one JSON object")] = False,
    dp: DpO = None, ep: EpO = None, disagg: DisaggO = False, kv_link: LinkO = None,
    async_scheduling: fl.AsyncOpt = None,
) -> None:
    """Cheapest configuration that meets the SLO: funnel search, verified fleet, why, levers."""
    _plan_and_show(dict(locals()), as_json)


def _plan_and_show(args: dict[str, Any], as_json: bool) -> None:
    from kvplan.cli.cmd_plan_disagg import check_disagg_args, disagg_side

    check_disagg_args(args)
    out = _check_plot(args)
    result = run_plan(args, show_progress=not as_json and sys.stdout.isatty())
    if result.winner is None and not args["disagg"]:
        from kvplan.analysis.plan.why.verdict import refused_whole
        from kvplan.errors import InputError

        refused = refused_whole(result.candidates)
        if refused is not None:  # the flags, not the SLO: bad input (exit 2, docs/planner.md)
            raise InputError(refused)
    _output(result, out, as_json, disagg_side(args, result) if args["disagg"] else None)


def run_plan(args: dict[str, Any], *, show_progress: bool) -> Any:
    """Build the inputs from the flags and call kvplan.plan (a progress bar on a terminal)."""
    from kvplan.analysis.plan.args import plan_kwargs, slo_from, workload_from
    from kvplan.analysis.plan.planner import plan

    slo = slo_from(args)
    work = workload_from(args)
    kwargs = plan_kwargs(args, parse_flag=fl.parse_flag)
    with _Progress(show_progress) as tick:
        return plan(args["model"], work, slo, progress=tick, **kwargs)


def _check_plot(args: dict[str, Any]) -> Any:
    """Refuse a bad --plot path (an input, a folder, a wrong extension) before planning."""
    if args["plot"] is None:
        return None
    from kvplan.cli.common import check_output
    from kvplan.report.charts import check_chart_path

    check_chart_path(args["plot"])
    inputs = (args["model"], args["trace"], args["prices"], args["profile"])
    return check_output(args["plot"], "--plot", inputs)


def _output(result: Any, plot_out: Any, as_json: bool, side: Any = None) -> None:
    from kvplan.cli.cmd_plan_disagg import render_side, side_json
    from kvplan.cli.common import write_output
    from kvplan.report.plan.plan_json import plan_json
    from kvplan.report.plan.plan_text import render_plan

    if as_json:
        doc = plan_json(result)
        if side is not None:
            doc["joint"] = side_json(side, result)
        print_json(doc)
    else:
        render_plan(result, console)
        if side is not None:
            render_side(side, result, console)
    if plot_out is not None:  # also when nothing is feasible: the closest anchor its axes
        from kvplan.report.charts import chart_bytes
        from kvplan.report.plan.plan_chart import pareto_chart

        data = chart_bytes(pareto_chart(result), plot_out.path.suffix)
        write_output(plot_out, data, as_json=as_json)
    if result.winner is None and (side is None or side.best is None):
        # exit codes (docs/planner.md): 0 feasible, 1 nothing feasible, 2 bad input; a
        # SystemExit, as click's standalone_mode=False returns typer.Exit codes unused
        sys.exit(INFEASIBLE)


class _Progress:
    """A rich progress bar: candidates screened, then simulated rounds (terminal only)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> Callable[[str, int, int], None] | None:
        if not self.enabled:
            return None
        from rich.progress import Progress

        self.bar = Progress(console=rich_console(), transient=True)
        self.bar.start()
        return self.tick

    def tick(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            label = {"screen": "screened", "simulate": "simulated"}.get(stage, stage)
            self.tasks[stage] = self.bar.add_task(f"candidates {label}", total=total)
        self.bar.update(self.tasks[stage], completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
