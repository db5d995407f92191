"""The latency command (with --sweep and --explain): a static batch priced op by op."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.common import check_plot, console, print_json, write_chart

if TYPE_CHECKING:
    from kvplan.costs.step.latency import LatencyResult, SweepRow
    from kvplan.costs.step.roofline import Profile, StepCost

ModelArg = Annotated[list[str] | None, typer.Argument(
    metavar="MODEL [-- vllm serve MODEL ...]",
    help="Hugging Face id from 'kvplan models' or a config.json; or, after --, a pasted vLLM "
    "command line.")]
GpuOpt = Annotated[str, typer.Option("--gpu", help="GPU id from the catalog, or a YAML/JSON file.")]
ProfileOpt = Annotated[
    str | None, typer.Option("--profile", help="Profile JSON from 'kvplan calibrate'.")
]
SweepOpt = Annotated[str | None, typer.Option(
    "--sweep", help="LEVER=V1,V2,...: batch, prompt, output, kv-cache-dtype, "
    "tensor-parallel-size, max-num-batched-tokens.")]


@app.command("latency")
def latency_cmd(
    gpu: GpuOpt,
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt tokens per request (P).")],
    output: Annotated[int, typer.Option("--output", help="Output tokens per request (O).")],
    batch: Annotated[int, typer.Option("--batch", help="Identical requests started together.")] = 1,
    tensor_parallel_size: fl.TpOpt = None, pipeline_parallel_size: fl.PpOpt = None,
    data_parallel_size: fl.DpOpt = None, enable_expert_parallel: fl.EpOpt = None,
    all2all_backend: fl.A2aOpt = None, expert_imbalance: fl.ImbalanceOpt = None,
    mxfp4_moe_backend: fl.Mxfp4Opt = None, enable_dbo: fl.DboOpt = None,
    dbo_decode_token_threshold: fl.DboDecodeOpt = None,
    dbo_prefill_token_threshold: fl.DboPrefillOpt = None, dtype: fl.DtypeOpt = None,
    quantization: fl.QuantOpt = None, kv_cache_dtype: fl.KvDtypeOpt = None,
    max_num_batched_tokens: fl.BatchedOpt = None, async_scheduling: fl.AsyncOpt = None,
    mamba_cache_dtype: fl.MambaOpt = None, mamba_ssm_cache_dtype: fl.MambaSsmOpt = None,
    profile: ProfileOpt = None, sweep: SweepOpt = None, as_json: fl.JsonOpt = False,
    plot: Annotated[str | None, typer.Option(
        "--plot", help="With --sweep: write the sweep chart (.png, .svg or .html).")] = None,
    explain_ops: Annotated[bool, typer.Option(
        "--explain", help="List each op's time in one prefill and one decode step.")] = False,
    model_and_args: ModelArg = None,
) -> None:
    """TTFT, TPOT, end-to-end time and throughput of a static batch, priced op by op from
    measured kernels (the roofline where a GPU has no tables)."""
    from kvplan.cli.fast.pasted_args import read_command_line
    from kvplan.costs.memory.resolved import resolve
    from kvplan.costs.step import latency as lat
    from kvplan.specs.hardware import load_gpu

    extra = {"all2all_backend": all2all_backend, "expert_imbalance": expert_imbalance,
             "mxfp4_moe_backend": mxfp4_moe_backend}
    line = read_command_line(model_and_args or [], {**fl.engine_settings(locals()), **{
        k: v for k, v in extra.items() if v is not None}}, prices_steps=True)
    line.note_ignored()
    _check_modes(plot, sweep, explain_ops)
    plot_out = check_plot(plot, [line.model, gpu, profile])
    shape = lat.RequestShape(batch=batch, prompt_tokens=prompt, output_tokens=output)
    (spec, layout), hw = line.load(), load_gpu(gpu)
    engine = fl.resolve_engine(line.settings, spec if sweep is not None else None)
    r = None if sweep is not None else resolve(spec, hw, engine)  # TP checked there
    _check_layout_fits(layout, spec, (hw, engine, shape, sweep))
    prof = _profile(profile, spec, hw, engine, r)
    deployment = (spec, hw.id, engine.tensor_parallel_size)
    if sweep is not None:
        from kvplan.costs.step.parallel.dp_latency import check_sweep_plain

        check_sweep_plain(engine)
        _run_sweep(sweep, (spec, hw, engine, shape, prof), plot_out, as_json, deployment)
        return
    _answer(spec, hw, engine, shape, prof, (as_json, explain_ops), r)


def _check_layout_fits(layout: Any, spec: Any, run: tuple[Any, Any, Any, str | None]) -> None:
    """With the hybrid KV cache manager off (a pasted flag), the batch must fit as vLLM then
    caches it (sliding layers in full); steps are still priced on the windowed model."""
    from kvplan.costs.step.latency import check_batch_fits, rank_shape

    hw, engine, shape, sweep = run
    if layout is not spec and sweep is None:
        check_batch_fits(layout, hw, engine, rank_shape(shape, engine.data_parallel_size))


def _check_modes(plot: Any, sweep: str | None, explain_ops: bool) -> None:
    """--plot needs a sweep; --explain (one answer's ops) refuses one."""
    from kvplan.errors import InputError

    if plot is not None and sweep is None:
        raise InputError("--plot draws a sweep; add --sweep LEVER=V1,V2,...")
    if explain_ops and sweep is not None:
        raise InputError("--explain lists one answer's ops, not a sweep's: drop --sweep, or "
                         "run latency at one of its values with --explain")


def _answer(spec: Any, hw: Any, engine: Any, shape: Any, prof: Profile,
            modes: tuple[bool, bool], r: Any = None) -> None:
    """Print one latency answer: JSON, or the table (+ each op's time with --explain)."""
    from kvplan.costs.step.parallel import dp_latency as dpl
    from kvplan.report.ops_view import ops_view

    if (warning := dpl.ep_no_effect(spec, engine)) is not None:
        typer.echo(warning, err=True)
    as_json, explain_ops = modes
    deployment = (spec, hw.id, engine.tensor_parallel_size)
    fleet = dpl.fleet_latency(spec, hw, engine, shape, prof, r)
    parallel = engine.data_parallel_size > 1 or engine.enable_expert_parallel
    rank_json = dpl.parallel_latency_json(spec, engine, fleet.rank_shape) if parallel else {}
    result = fleet.result
    dpl.note_waves(hw, engine, fleet.rank_shape.batch)
    basis, steps = ops_view(spec, hw, engine, prof, fleet.rank_shape, r)
    if as_json:
        from kvplan.report.json_views import latency_answer_json
        from kvplan.report.ops_view import step_ops_json

        extra = {"parallel": rank_json} if parallel else {}
        print_json({**latency_answer_json(result, prof, deployment), **extra, "kernels": basis,
                    "step_ops": step_ops_json(steps)})
        return
    from kvplan.costs.step.uncertainty import latency_bands

    _show_latency(spec.name, hw.id, result, prof, latency_bands(deployment, result),
                  basis.startswith("kernels measured"))
    if parallel:
        from kvplan.report.parallel_view import parallel_latency_line

        console.print(parallel_latency_line(rank_json))
    console.print(basis)
    if explain_ops:
        from kvplan.report.ops_view import step_ops_tables

        for table in step_ops_tables(steps):
            console.print(table)
        if not steps:
            why = (f"{hw.id} has no measured kernel tables" if basis.startswith("roofline: "
                   f"{hw.id}") else "no measured kernel table holds this precision")
            console.print(f"--explain: no per-op table: {why}, so the roofline prices each "
                          "step whole (the prefill and decode lines above)")


def _run_sweep(sweep: str, inputs: tuple[Any, ...], plot_out: Any, as_json: bool,
               deployment: Any) -> None:
    from kvplan.costs.step import latency as lat

    spec, hw, engine, shape, prof = inputs
    lever, values = lat.parse_sweep(sweep)
    rows = lat.sweep(spec, hw, engine, shape, lever, values, prof)
    if plot_out is not None:
        from kvplan.report.budget_charts import sweep_chart

        write_chart(plot_out, sweep_chart(lever, rows), as_json=as_json)
    _show_sweep(lever, rows, as_json, deployment)


def _band_text(band: list[float] | None, fmt: Any) -> str:
    return "-" if band is None else f"{fmt(band[0])} - {fmt(band[1])}"


def _profile(path: str | None, spec: Any, hw: Any, engine: Any, r: Any) -> Profile:
    from kvplan.costs.step.profiles import profile_for

    return profile_for(spec, hw, engine, path, precision=None if r is None else r.compute_precision)


def explain(phase: str, cost: StepCost, measured: bool = False) -> str:
    """One line: why the phase landed on its bound (intensity vs ridge point). The two sides
    are the phase's FLOPs and bytes over the ridge's rates, not parts of its time: on the
    measured tables the FLOP rate is one 8,192-cubed GEMM's, which a model's larger GEMMs
    beat (Llama-3.1-8B's 8,000-token prefill on H100: 159.54 ms of FLOPs at that rate in a
    158.57 ms TTFT), so the line also gives what the kernels take (``roofline_s``)."""
    ai, ridge = cost.arithmetic_intensity, cost.ridge_point
    s = cost.seconds
    side = ">" if ai >= ridge else "<"
    ratio = ai / ridge if ai >= ridge else ridge / ai
    rates = (("the measured 8,192^3 GEMM's FLOP/s", "the measured streaming bytes/s")
             if measured else ("the roofline's FLOP/s", "its bytes/s"))
    return (
        f"{phase}: {cost.tokens} tokens over {cost.steps} step(s), {ai:,.0f} FLOP/byte {side} "
        f"ridge {ridge:,.0f} FLOP/byte ({ratio:.1f}x) -> {cost.bound}-bound (FLOPs at "
        f"{rates[0]}: {s.compute_s * 1e3:,.2f} ms, bytes at {rates[1]}: "
        f"{s.memory_s * 1e3:,.2f} ms; the kernels take {s.roofline_s * 1e3:,.2f} ms)"
    )


def _show_latency(model: str, gpu: str, r: LatencyResult, prof: Profile,
                  bands: dict[str, Any], measured: bool = False) -> None:
    from rich.table import Table

    from kvplan.units import fmt_bytes, fmt_seconds

    shape = r.shape
    table = Table(title=f"{model} on {gpu}: batch {shape.batch}, prompt {shape.prompt_tokens}, "
                        f"output {shape.output_tokens}")
    for col in ("metric", "value", "band (10-90%)"):
        table.add_column(col)

    def tps(x: float) -> str:
        return f"{x:,.0f} tok/s"

    table.add_row("TTFT", fmt_seconds(r.ttft_s), _band_text(bands["ttft_s_band"], fmt_seconds))
    table.add_row("TPOT", "-" if r.tpot_s is None else fmt_seconds(r.tpot_s),
                  _band_text(bands["tpot_s_band"], fmt_seconds))
    table.add_row("end-to-end", fmt_seconds(r.e2e_s),
                  _band_text(bands["e2e_s_band"], fmt_seconds))
    table.add_row("output throughput", tps(r.output_throughput_tok_s),
                  _band_text(bands["output_throughput_tok_s_band"], tps))
    for name, cost in (("prefill", r.prefill), ("decode", r.decode)):
        if cost is not None:
            table.add_row(f"{name} FLOPs / bytes",
                          f"{cost.flops.total:.3g} / {fmt_bytes(cost.bytes.total)}", "")
    console.print(table)
    console.print(f"band: calibration residuals of {bands['band_basis']}")
    for note in bands["calibration_notes"]:
        console.print(f"note: {note}")
    console.print(explain("prefill", r.prefill, measured))
    if r.decode is not None:
        console.print(explain("decode", r.decode, measured))
    console.print(f"profile {prof.gpu}/{prof.precision}: step overhead "
                  f"{fmt_seconds(prof.step_overhead_s)}, prefill overhead "
                  f"{fmt_seconds(prof.prefill_overhead_s)}, per layer "
                  f"{prof.layer_overhead_s * 1e6:.1f} us (+{prof.moe_layer_overhead_s * 1e6:.1f}"
                  f" us MoE), per request {prof.request_overhead_s * 1e6:.1f} us, all-reduce "
                  f"latency {prof.allreduce_latency_s * 1e6:.1f} us")


def _show_sweep(lever: str, rows: list[SweepRow], as_json: bool, deployment: Any) -> None:
    from kvplan.report.json_views import sweep_json, sweep_no_fit, sweep_turn

    turn, no_fit = sweep_turn(rows), sweep_no_fit(rows)
    if as_json:
        print_json(sweep_json(lever, rows, deployment))
        return
    from rich.table import Table

    table = Table(title=f"sweep of {lever}")
    for col in (lever, "TTFT", "TPOT", "throughput tok/s", "prefill", "decode", "KV fits", "note"):
        table.add_column(col)
    for r in rows:
        table.add_row(*_sweep_cells(r, turn, no_fit))
    console.print(table)


def _sweep_cells(r: SweepRow, turn: str | None, no_fit: str | None) -> tuple[str, ...]:
    from kvplan.units import fmt_seconds

    if not r.weights_fit:
        return (r.value, "-", "-", "-", "-", "-", "NO", "weights do not fit: no latency")
    res, note = r.result, []
    if r.value == turn:
        note.append("decode turns compute-bound")
    if r.value == no_fit:
        note.append(f"KV cache no longer fits (max batch {r.max_batch})")
    return (r.value, fmt_seconds(res.ttft_s),
            "-" if res.tpot_s is None else fmt_seconds(res.tpot_s),
            f"{res.output_throughput_tok_s:,.0f}", res.prefill_bound,
            res.decode_bound or "-", "yes" if r.fits else "NO", "; ".join(note))
