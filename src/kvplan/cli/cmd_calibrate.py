"""The calibrate command: fit the latency profile's engine overheads to measured runs (serving
runs through the simulator, static batches as such), refuse untrustworthy fits, render them."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.common import console, print_json

if TYPE_CHECKING:
    from kvplan.analysis.calibration.static_fit import CalibrationResult

FilesArg = Annotated[
    list[str], typer.Argument(help="Measurement files: CSV, JSON, vllm bench output.")
]
MaybeGpu = Annotated[str | None, typer.Option(
    "--gpu", help="GPU the runs were measured on (a file naming another is refused).")]
MaybeModel = Annotated[str | None, typer.Option(
    "--model", help="Model the runs served, e.g. for a vLLM model_id that is a local folder "
    "(a file naming another model is refused).")]
OutOpt = Annotated[str | None, typer.Option("--out", help="Write the fitted profile JSON here.")]
FitStepOpt = Annotated[bool, typer.Option(
    "--fit-step-overhead", help="Fit the per-step overhead (static fits always do now).")]


@app.command("calibrate")
def calibrate_cmd(
    files: FilesArg,
    gpu: MaybeGpu = None,
    model: MaybeModel = None,
    batch: Annotated[int | None, typer.Option("--batch")] = None,
    prompt: Annotated[int | None, typer.Option("--prompt")] = None,
    output: Annotated[int | None, typer.Option("--output")] = None,
    tensor_parallel_size: fl.TpOpt = None,
    dtype: fl.DtypeOpt = None,
    quantization: fl.QuantOpt = None,
    kv_cache_dtype: fl.KvDtypeOpt = None,
    async_scheduling: fl.AsyncOpt = None,
    max_num_batched_tokens: fl.BatchedOpt = None,
    max_num_seqs: fl.SeqsOpt = None,
    max_model_len: fl.MaxLenOpt = None,
    out: OutOpt = None,
    fit_step_overhead: FitStepOpt = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Write the profile even if the fit is pinned at a bound, "
        "underdetermined or leaves a large error; drop (with a note) measured values faster "
        "than the GPU's datasheet allows instead of refusing the file.")] = False,
    as_json: fl.JsonOpt = False,
) -> None:
    """Fit the latency profile per GPU and precision: serving runs (vllm bench serve results,
    CSV sweeps) through the simulator, vllm bench latency files as static batches."""
    from kvplan.analysis.calibration import serving_fit as sc
    from kvplan.analysis.calibration import static_fit as cal
    from kvplan.cli.common import check_output

    defaults = _defaults(dict(locals()))
    out_file = check_output(out, "--out", (*files, model, gpu))
    serving = [f for f in files if sc.is_serving_file(f)]
    if serving:
        fit = _calibrate_serving(files, serving, defaults, force)
        _finish_calibration(fit.problems, force, out_file, fit.profiles, as_json)
        if as_json:
            print_json(serving_calibration_json(fit))
        else:
            _show_serving_calibration(fit)
        return
    names = tuple(dict.fromkeys((*cal.FITTED, "step_overhead_s"))) if fit_step_overhead \
        else cal.FITTED  # FITTED holds the step overhead already: never count a term twice
    result = _calibrate_static(files, defaults, names, force)
    problems = sc.static_problems(result, names)
    _finish_calibration(problems, force, out_file, result.profiles, as_json)
    if as_json:  # the reasons a forced fit was not trusted, as the serving JSON lists them
        print_json({**calibration_json(result), "problems": problems})
        return
    _show_calibration(result)


def _defaults(given: dict[str, Any]) -> Any:
    """The fill-ins for points that lack a field: the options, engine flags resolved."""
    from kvplan.analysis.calibration import static_fit as cal

    engine = fl.resolve_engine(fl.engine_settings(given))
    return cal.Defaults(model=given["model"], gpu=given["gpu"], batch=given["batch"],
                        prompt=given["prompt"], output=given["output"],
                        tensor_parallel_size=engine.tensor_parallel_size, dtype=engine.dtype,
                        quantization=engine.quantization, kv_cache_dtype=engine.kv_cache_dtype,
                        async_scheduling=engine.async_scheduling,
                        max_num_batched_tokens=engine.max_num_batched_tokens,
                        max_num_seqs=engine.max_num_seqs, max_model_len=engine.max_model_len)


def _calibrate_static(files: list[str], defaults: Any, names: tuple[str, ...],
                      force: bool) -> Any:
    from kvplan.analysis.calibration import static_fit as cal
    from kvplan.analysis.calibration.floor_check import drop_measurements
    from kvplan.errors import TraceError

    points = [p for f in files for p in cal.read_measurements(f, defaults)]
    if not points:
        raise TraceError(f"{files[0]}:1: no static-batch measurement points found")
    points = _physical(*drop_measurements(points), force, files[0])
    return cal.fit_profiles(points, fitted_on=", ".join(files), names=names,
                            start=cal.default_profiles().default)


def _calibrate_serving(files: list[str], serving: list[str], defaults: Any,
                       force: bool) -> Any:
    from kvplan.analysis.calibration import serving_fit as sc
    from kvplan.analysis.calibration import static_fit as cal
    from kvplan.analysis.calibration.public_set import drop_below_floor

    points = [sc.to_point(r) for f in serving for r in sc.read_serving(f, defaults)]
    for f in files:
        if f not in serving:
            points.extend(sc.static_point(m) for m in cal.read_measurements(f, defaults))
    points = _physical(*drop_below_floor(points), force, files[0])
    return sc.fit_user(points, cal.default_profiles(), fitted_on=", ".join(files))


def _physical(points: list[Any], dropped: list[Any], force: bool, first: str) -> list[Any]:
    """The points left once measured values faster than the GPU's datasheet allows are
    refused (exit 2, nothing written) or, with --force, dropped with a note each."""
    from kvplan.analysis.calibration.floor_check import drop_note, refusal
    from kvplan.analysis.calibration.serving_fit import CalibrationRefused
    from kvplan.errors import TraceError

    if dropped and not force:
        raise CalibrationRefused(refusal(dropped))
    for b in dropped:
        typer.echo(drop_note(b), err=True)
    if not points:  # all dropped by --force, or a file of no runs (a header alone)
        raise TraceError(f"{first}:1: " + ("no measured value is left after --force" if dropped
                                           else "no runs (need a header and at least one row)"))
    return points


def _finish_calibration(problems: Any, force: bool, out_file: Any, profiles: Any,
                        as_json: bool) -> None:
    """Refuse an untrustworthy fit (exit 2, nothing written) unless --force; then write."""
    from kvplan.analysis.calibration.serving_fit import CalibrationRefused, refusal
    from kvplan.cli.common import write_output
    from kvplan.costs.step.profiles import profiles_to_dict
    from kvplan.report.json_out import dumps

    if problems and not force:
        raise CalibrationRefused(refusal(problems))
    for p in problems:
        typer.echo(f"warning: {p} (written anyway: --force)", err=True)
    if out_file is not None:
        write_output(out_file, dumps(profiles_to_dict(profiles)) + "\n", as_json=as_json)


def serving_calibration_json(fit: Any) -> dict[str, Any]:
    from statistics import median

    from kvplan.costs.step.profiles import profiles_to_dict

    errs: dict[str, list[float]] = {}
    for _, _, metric, meas, pred in fit.errors:
        errs.setdefault(metric, []).append(abs(pred / meas - 1))
    return {**profiles_to_dict(fit.profiles), "problems": list(fit.problems),
            "points": [{"id": i, "gpu": g, "metric": m, "measured": v, "predicted": p,
                        "error": p / v - 1} for i, g, m, v, p in fit.errors],
            "median_abs_error": {m: median(e) for m, e in errs.items()}}


def _show_serving_calibration(fit: Any) -> None:
    from rich.table import Table

    table = Table(title="fitted profiles (serving runs replayed in the simulator)")
    # the terms the fit moved (serving_fit.USER_FITTED); the rest stay the bundled profile's
    for col in ("GPU", "precision", "step overhead", "per-request overhead", "API path"):
        table.add_column(col)
    for p in fit.profiles.profiles:
        table.add_row(p.gpu, p.precision, f"{p.step_overhead_s * 1e3:.3f} ms",
                      f"{p.request_overhead_s * 1e6:.1f} us", f"{p.api_request_s * 1e3:.2f} ms")
    console.print(table)
    points = Table(title="per-run error")
    for col in ("run", "GPU", "metric", "measured", "simulated", "error"):
        points.add_column(col)
    for i, g, m, v, p in fit.errors:
        points.add_row(i, g, m, f"{v:.4g}", f"{p:.4g}", f"{p / v - 1:+.1%}")
    console.print(points)


def calibration_json(result: CalibrationResult) -> dict[str, Any]:
    from kvplan.analysis.calibration.measurements import METRICS
    from kvplan.costs.step.profiles import profiles_to_dict

    return {
        **profiles_to_dict(result.profiles),
        "points": [{**asdict(e), "error": e.error} for e in result.errors],
        "median_abs_error": {m: result.median_abs_error(m) for m in METRICS},
    }


def _show_calibration(result: CalibrationResult) -> None:
    from rich.table import Table

    from kvplan.analysis.calibration.measurements import METRICS

    table = Table(title="fitted profiles")
    for col in ("GPU", "precision", "compute_eff", "bandwidth_eff", "step overhead",
                "prefill overhead"):
        table.add_column(col)
    for p in result.profiles.profiles:
        table.add_row(p.gpu, p.precision, f"{p.compute_eff:.3f}", f"{p.bandwidth_eff:.3f}",
                      f"{p.step_overhead_s * 1e3:.2f} ms", f"{p.prefill_overhead_s * 1e3:.2f} ms")
    console.print(table)
    points = Table(title="per-point error")
    for col in ("point", "GPU", "metric", "measured", "predicted", "error"):
        points.add_column(col)
    for e in result.errors:
        points.add_row(e.id, e.gpu, e.metric, f"{e.measured:.4g}", f"{e.predicted:.4g}",
                       f"{e.error:+.1%}")
    console.print(points)
    for m in METRICS:
        med = result.median_abs_error(m)
        if med is not None:
            console.print(f"median |error| {m}: {med:.1%}")
