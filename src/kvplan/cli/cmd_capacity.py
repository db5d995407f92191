"""Commands about capacity on real GPUs: capacity (vLLM's startup numbers) and gpus."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.common import check_plot, console, print_json, write_chart
from kvplan.cli.fast.pasted_args import CommandLine, read_command_line
from kvplan.cli.pasted import WARNED
from kvplan.errors import DoesNotFitError
from kvplan.report.json_views import plan_json

if TYPE_CHECKING:
    from kvplan.costs.memory.plan import MemoryPlan
    from kvplan.specs.model import ModelSpec


EagerOpt = Annotated[bool | None, typer.Option(
    "--enforce-eager/--no-enforce-eager", show_default=False,
    help="vLLM's --enforce-eager: no CUDA graphs, so no graph memory.")]


@app.command("capacity", context_settings={"ignore_unknown_options": True})
def capacity_cmd(
    model_and_args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="MODEL [-- vllm serve MODEL ...]",
            help="Catalog id or config.json path; or, after --, a pasted vLLM command line.",
        ),
    ] = None,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id or alias (see 'kvplan gpus').")]
    = "H100",
    tensor_parallel_size: fl.TpOpt = None, pipeline_parallel_size: fl.PpOpt = None,
    data_parallel_size: fl.DpOpt = None, enable_expert_parallel: fl.EpOpt = None,
    gpu_memory_utilization: fl.GpuUtilOpt = None, max_model_len: fl.MaxLenOpt = None,
    kv_cache_dtype: fl.KvDtypeOpt = None, dtype: fl.DtypeOpt = None,
    quantization: fl.QuantOpt = None, block_size: fl.BlockOpt = None,
    max_num_batched_tokens: fl.BatchedOpt = None, max_num_seqs: fl.SeqsOpt = None,
    kv_cache_memory_bytes: fl.KvMemOpt = None, num_gpu_blocks_override: fl.BlocksOpt = None,
    mamba_cache_dtype: fl.MambaOpt = None,
    mamba_ssm_cache_dtype: fl.MambaSsmOpt = None, enforce_eager: EagerOpt = None,
    as_json: fl.JsonOpt = False, plot: Annotated[str | None, typer.Option(
        "--plot", help="Write the budget as a stacked bar (.png, .svg or .html).")] = None,
) -> None:
    """How many requests fit: vLLM 0.11's memory budget, KV blocks, tokens and concurrency."""
    given = fl.engine_settings(locals())
    if enforce_eager is not None:
        given["enforce_eager"] = enforce_eager
    settings, ignored = _gather(model_and_args or [], given)
    plot_out = check_plot(plot, [settings.get("model"), gpu])
    try:
        plan = _plan(settings, gpu)
    except DoesNotFitError as exc:
        _does_not_fit(exc, settings, gpu, ignored, as_json)
    _warn_given_kv(plan)
    if plot_out is not None:
        from kvplan.report.budget_charts import budget_chart

        write_chart(plot_out, budget_chart(plan), as_json=as_json)
    extra = _parallel_extra(plan, settings)
    if as_json:
        print_json({**plan_json(plan), **extra, "ignored_vllm_flags": ignored})
        return
    _render(plan, ignored)
    if extra:
        from kvplan.report.parallel_view import parallel_lines

        for line in parallel_lines(plan, _model(settings)):
            console.print(line)


def _warn_given_kv(plan: MemoryPlan) -> None:
    """--kv-cache-memory that cannot sit beside the weights on the GPU, or
    --num-gpu-blocks-override past the free memory: a stderr warning."""
    from kvplan.costs.memory.given_kv import plan_warnings

    for warning in plan_warnings(plan):
        print(warning, file=sys.stderr)


def _model(settings: dict[str, Any]) -> Any:
    return _load(settings)[0]


def _parallel_extra(plan: MemoryPlan, settings: dict[str, Any]) -> dict[str, Any]:
    """DP / EP: the ``parallel`` JSON object (and EP's no-effect warning on stderr)."""
    from kvplan.report.parallel_view import ep_warning, is_parallel, parallel_json

    if not is_parallel(plan):
        return {}
    model = _model(settings)
    warning = ep_warning(plan, model)
    if warning is not None:
        print(warning, file=sys.stderr)
    return {"parallel": parallel_json(plan, model)}


DOES_NOT_FIT = 1
"""Exit status when the configuration does not fit (bad input is 2)."""


def _does_not_fit(exc: DoesNotFitError, settings: dict[str, Any], gpu: str, ignored: list[str],
                  as_json: bool) -> None:
    """Exit 1: one line on stderr, or (--json) the whole plan with what would fit."""
    if not as_json:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(DOES_NOT_FIT)
    from kvplan.costs.memory.plan import largest_max_model_len, unchecked_plan
    from kvplan.specs.hardware import load_gpu

    model, fields = _load(settings)
    plan = unchecked_plan(model, load_gpu(gpu), fl.resolve_engine(fields))
    levers = str(exc).partition("; fits with ")[2]
    doc = plan_json(plan)
    short = max(0, -doc["available_kv_bytes"])  # weights etc. exceed the requested memory
    doc["available_kv_bytes"] = max(0, doc["available_kv_bytes"])
    print_json({**doc, "ignored_vllm_flags": ignored, "fits": False, "over_budget_bytes": short,
                "why": str(exc), "needed_bytes": exc.needed_bytes,
                "largest_max_model_len": largest_max_model_len(plan),
                "fits_with": [x.strip() for x in levers.split(" or ")] if levers else []})
    sys.exit(DOES_NOT_FIT)


def _gather(args: list[str], own: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Model and settings from the positional model or a pasted command beside the own
    options (fast/pasted_args.py: a setting given both ways is refused)."""
    line = read_command_line(args, own)
    settings = {"model": line.model, **line.settings}
    if line.manager_off is not None:
        settings[_MANAGER_OFF] = line.manager_off
    return settings, line.ignored


_MANAGER_OFF = "hybrid_kv_cache_manager_off_by"
"""Settings key: the pasted flag that turns vLLM's hybrid KV cache manager off."""


def _load(settings: dict[str, Any]) -> tuple[ModelSpec, dict[str, Any]]:
    """The model as vLLM lays out its cache (with the hybrid KV cache manager off, if a
    pasted flag turned it off) and the engine fields."""
    fields = dict(settings)
    line = CommandLine(fields.pop("model"), {}, [], fields.pop(_MANAGER_OFF, None))
    return line.load()[1], fields


def _plan(settings: dict[str, Any], gpu: str) -> MemoryPlan:
    from kvplan.costs.memory.plan import plan_memory
    from kvplan.specs.hardware import load_gpu

    model, fields = _load(settings)
    return plan_memory(model, load_gpu(gpu), fl.resolve_engine(fields))  # TP: by the plan


def _render(plan: MemoryPlan, ignored: list[str]) -> None:
    from kvplan.report.views.capacity import capacity_renderables

    for item in capacity_renderables(plan):
        console.print(item)
    rest = [f for f in ignored if f not in WARNED]  # the others warned on stderr
    if rest:
        console.print(f"note: ignored vLLM flags: {', '.join(rest)}")


@app.command("gpus")
def gpus_cmd(as_json: fl.JsonOpt = False) -> None:
    """List the bundled GPU catalog (memory, bandwidth, dense bf16 FLOP/s, interconnect,
    whose measured kernel tables price each GPU)."""
    if as_json:
        from kvplan.report.json_views import gpus_json

        print_json(gpus_json())
        return
    from rich.table import Table

    from kvplan.costs.memory.vllm_defaults import cuda_total_bytes
    from kvplan.report.json_views import kernel_tables_of
    from kvplan.specs.hardware import gpu_catalog

    gpus = list(gpu_catalog().values())
    table = Table(title="GPUs")
    for col in ("id", "memory", "CUDA total", "bandwidth", "bf16 dense", "interconnect",
                "kernel tables"):
        table.add_column(col)
    for g in gpus:
        table.add_row(
            g.id,
            f"{g.memory_bytes / 1e9:.0f} GB",
            f"{cuda_total_bytes(g) / 2**30:.2f} GiB",
            f"{g.mem_bw_bytes_per_s / 1e12:.2f} TB/s",
            f"{g.peak_flops_for('bfloat16') / 1e12:.0f} TFLOP/s",
            g.interconnect,
            _tables_word(g.id, kernel_tables_of(g.id)),
        )
    console.print(table)


def _tables_word(gpu_id: str, tables: str | None) -> str:
    """'measured', a twin's ('H100-SXM-80GB's'), or 'none (roofline): L40S's rates', the
    measured GPU whose kernels' efficiencies the roofline stands on."""
    if tables is None:
        from kvplan.costs.kernels.donor import rates_donor
        from kvplan.specs.hardware import load_gpu

        return f"none (roofline): {rates_donor(load_gpu(gpu_id))}'s rates"
    return "measured" if tables == gpu_id else f"{tables}'s"
