"""Commands for the browser: web (the local page) and report (one self-contained HTML file)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.common import write_output

if TYPE_CHECKING:
    from kvplan.costs.step.latency import RequestShape
    from kvplan.report.outputs import OutputTarget
    from kvplan.specs.serving import EngineConfig


TOKEN_ENV = "KVPLAN_WEB_TOKEN"
"""A fixed token for a server run as a service (else a fresh one is made and printed once)."""


@app.command("web")
def web_cmd(
    host: Annotated[str, typer.Option(
        "--host", help="Address to bind (loopback by default; any other asks for a token).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    max_sim_requests: Annotated[int, typer.Option(
        "--max-sim-requests", help="Requests one page simulation may hold.")] = 2000,
    max_sim_seconds: Annotated[float, typer.Option(
        "--max-sim-seconds", help="Wall time one simulation or plan may take.")] = 60.0,
    max_running: Annotated[int, typer.Option(
        "--max-running-sims", help="Simulations and plans run at once (all clients).")] = 2,
    max_queued: Annotated[int, typer.Option(
        "--max-queued-sims", help="More that wait their turn; beyond: 503.")] = 8,
    no_auth: Annotated[bool, typer.Option(
        "--no-auth", help="Off loopback, serve without a token (prints a warning).")] = False,
) -> None:
    """Serve the web page (Model, Request, Capacity, Latency, Simulate, Plan) and its JSON API."""
    from kvplan.errors import InputError
    from kvplan.web.settings import WebSettings
    from kvplan.web.transport import check_listen, serve

    if not 0 < port < 65536:
        raise InputError(f"--port must be in 1..65535, got {port}")
    if max_sim_requests < 1 or not 0 < max_sim_seconds < float("inf"):  # NaN fails too
        raise InputError("--max-sim-requests and --max-sim-seconds must be positive (and "
                         f"finite), got {max_sim_requests} and {max_sim_seconds}")
    if max_running < 1 or max_queued < 0:
        raise InputError("--max-running-sims must be at least 1 and --max-queued-sims at "
                         "least 0")
    token = web_token(host, no_auth)
    check_listen(host, port)
    settings = WebSettings(max_sim_requests=max_sim_requests, max_sim_seconds=max_sim_seconds,
                           max_running_sims=max_running, max_queued_sims=max_queued,
                           field_help=field_help(), token=token)
    for line in access_lines(host, port, token, no_auth):
        typer.echo(line, err=line.startswith("warning: "))
    serve(host, port, settings)


def field_help() -> dict[str, dict[str, str]]:
    """command -> field (the flag in snake_case) -> that flag's --help line: the units and
    meaning of the API's fields (its /docs), in the CLI's own words."""
    import typer.main

    from kvplan.cli import app as cli

    cli._register()
    group: Any = typer.main.get_command(cli.app)
    return {name: {opt[2:].replace("-", "_"): " ".join(p.help.split())
                   for p in cmd.params if getattr(p, "help", None)
                   for opt in p.opts if opt.startswith("--")}
            for name, cmd in group.commands.items()}


def web_token(host: str, no_auth: bool) -> str | None:
    """$KVPLAN_WEB_TOKEN if set; else a fresh token off loopback (none with --no-auth)."""
    import os

    from kvplan.errors import InputError
    from kvplan.web.auth import MIN_TOKEN_CHARS, is_loopback, new_token

    fixed = os.environ.get(TOKEN_ENV)
    if fixed is not None:
        if len(fixed.strip()) < MIN_TOKEN_CHARS:
            raise InputError(f"${TOKEN_ENV} must hold at least {MIN_TOKEN_CHARS} characters "
                             "(or unset it: a random token is made)")
        return fixed.strip()
    return None if no_auth or is_loopback(host) else new_token()


def access_lines(host: str, port: int, token: str | None, no_auth: bool) -> list[str]:
    """What `kvplan web` prints at start: the URL (with the token, once), or the warning."""
    import os
    import socket

    from kvplan.web.auth import is_loopback

    shown = socket.gethostname() if host in ("0.0.0.0", "::", "") else host
    url = f"http://{shown}:{port}/"
    if token is None:
        lines = [f"kvplan web: open {url} (API docs at /docs); Ctrl-C stops"]
        if no_auth and not is_loopback(host):
            lines.append(f"warning: --no-auth on {host or 'all interfaces'}: anyone who can "
                         f"reach port {port} can run simulations on this machine, with no "
                         "token; bind 127.0.0.1 or drop --no-auth")
        return lines
    if os.environ.get(TOKEN_ENV) is not None:
        return [f"kvplan web: open {url}?token=<${TOKEN_ENV}>; every request needs that "
                "token; Ctrl-C stops"]
    return [f"kvplan web: open {url}?token={token}",
            "  every request needs this token (shown once): ?token= opens the page (and sets a "
            f"cookie); API clients send 'Authorization: Bearer {token}'; Ctrl-C stops"]


ReportModel = Annotated[str | None, typer.Argument(
    help="Catalog id or config.json path (or give --plan).")]
ReportOut = Annotated[str, typer.Option("-o", "--output-file", help="The HTML file to write.")]
ReportPlan = Annotated[str | None, typer.Option(
    "--plan", help="A saved 'kvplan plan --json' answer to report instead.")]
ReportProfile = Annotated[str | None, typer.Option(
    "--profile", help="Profile JSON from 'kvplan calibrate' (latency and simulation).")]
ReportDataset = Annotated[str | None, typer.Option(
    "--dataset", help="Also simulate: random or a bundled trace.")]
ReportPrompts = Annotated[int | None, typer.Option("--num-prompts", help=(
    "Also simulate this many requests (default with --dataset: a trace's every row; "
    "random, sharegpt: 1000)."))]
ReportRate = Annotated[float | None, typer.Option("--request-rate", help=(
    "The simulation's arrivals in requests/s (default: all at once, or a trace's own "
    "times)."))]


@app.command("report")
def report_cmd(
    model: ReportModel = None, out: ReportOut = "", plan: ReportPlan = None,
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id from 'kvplan gpus'.")] = "H100",
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt tokens per request.")] = 2048,
    output: Annotated[int, typer.Option("--output", help="Output tokens per request.")] = 256,
    batch: Annotated[int, typer.Option("--batch", help="Requests started together.")] = 16,
    tensor_parallel_size: fl.TpOpt = None, pipeline_parallel_size: fl.PpOpt = None,
    data_parallel_size: fl.DpOpt = None, enable_expert_parallel: fl.EpOpt = None,
    all2all_backend: fl.A2aOpt = None, expert_imbalance: fl.ImbalanceOpt = None,
    kv_cache_dtype: fl.KvDtypeOpt = None, dtype: fl.DtypeOpt = None,
    quantization: fl.QuantOpt = None, max_model_len: fl.MaxLenOpt = None,
    block_size: fl.BlockOpt = None, gpu_memory_utilization: fl.GpuUtilOpt = None,
    max_num_batched_tokens: fl.BatchedOpt = None, max_num_seqs: fl.SeqsOpt = None,
    kv_cache_memory_bytes: fl.KvMemOpt = None, enable_prefix_caching: fl.PrefixOpt = None,
    async_scheduling: fl.AsyncOpt = None, mxfp4_moe_backend: fl.Mxfp4Opt = None,
    enable_dbo: fl.DboOpt = None, dbo_decode_token_threshold: fl.DboDecodeOpt = None,
    dbo_prefill_token_threshold: fl.DboPrefillOpt = None, profile: ReportProfile = None,
    dataset: ReportDataset = None, num_prompts: ReportPrompts = None,
    request_rate: ReportRate = None,
) -> None:
    """One self-contained HTML file (data, charts, scripts inline) that opens offline."""
    from kvplan.costs.step.latency import RequestShape
    from kvplan.errors import InputError

    if not out:
        raise InputError("give -o FILE.html (where to write the report)")
    if plan is not None:
        _plan_alone(dict(locals()))
        _plan_report(plan, _check_html_out(out, plan))
        return
    if model is None:
        raise InputError("give a MODEL, or --plan FILE (a saved 'kvplan plan --json')")
    target = _check_html_out(out, model, profile)
    extra = {"all2all_backend": all2all_backend, "expert_imbalance": expert_imbalance,
             "mxfp4_moe_backend": mxfp4_moe_backend}
    settings = {**fl.engine_settings(locals()),
                **{k: v for k, v in extra.items() if v is not None}}
    shape = RequestShape(batch=batch, prompt_tokens=prompt, output_tokens=output)
    workload = _workload(dataset, num_prompts, request_rate, prompt, output)
    _model_report(target, (model, gpu, profile), settings, shape, workload)


def _model_report(target: OutputTarget, names: tuple[str, str, str | None],
                  settings: dict[str, object],
                  shape: RequestShape, workload: object | None) -> None:
    """Build and write one model's report: the engine as capacity/latency/simulate resolve it
    from the same flags (TP, PP, DP, EP and the rest)."""
    from kvplan.report.html import render_report
    from kvplan.report.report_page import report_sections
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    spec, hw = load_model(names[0]), load_gpu(names[1])
    engine = fl.resolve_engine(settings, spec)
    sections = report_sections(spec, hw, engine, shape, workload, profile=names[2])
    html = render_report(f"kvplan report: {spec.name} on {hw.id}",
                         f"batch {shape.batch}, prompt {shape.prompt_tokens}, output "
                         f"{shape.output_tokens} tokens; {_parallel_words(engine)}, KV cache "
                         f"{engine.kv_cache_dtype}", sections)
    write_output(target, html, as_json=False)


def _parallel_words(engine: EngineConfig) -> str:
    """'TP 1', or with more: 'TP 1, PP 2, DP 2, EP'."""
    words = [f"TP {engine.tensor_parallel_size}"]
    if engine.pipeline_parallel_size > 1:
        words.append(f"PP {engine.pipeline_parallel_size}")
    if engine.data_parallel_size > 1:
        words.append(f"DP {engine.data_parallel_size}")
    if engine.enable_expert_parallel:
        words.append("EP")
    return ", ".join(words)


_MODEL_REPORT_DEFAULTS = {"gpu": "H100", "prompt": 2048, "output": 256, "batch": 16,
                          "dataset": None, "num_prompts": None, "request_rate": None,
                          "profile": None, "all2all_backend": None, "expert_imbalance": None,
                          "mxfp4_moe_backend": None}
"""report_cmd's options for a model report that are no engine flag, at their defaults."""


def _plan_alone(values: dict[str, object]) -> None:
    """--plan reports a saved answer as it stands: a MODEL or a flag for one (``values``:
    report_cmd's parameters) is refused, not dropped without a word."""
    from kvplan.errors import InputError

    names = ["MODEL"] if values["model"] is not None else []
    names += ["--" + k.replace("_", "-") for k, v in _MODEL_REPORT_DEFAULTS.items()
              if values[k] != v]
    names += [fl.BY_FIELD[k].names[0] for k, v in values.items()
              if k in fl.BY_FIELD and v is not None]  # --no-X (False) was given too
    if names:
        raise InputError(f"--plan reports a saved plan as it stands; {', '.join(names)} would "
                         "be ignored: drop them, or drop --plan to report a model")


def _plan_report(path: str, target: OutputTarget) -> None:
    from kvplan.report.html import render_report
    from kvplan.report.plan.plan_report import load_plan_json, plan_sections

    data = load_plan_json(path)
    inputs = data.get("inputs") or {}
    html = render_report(f"kvplan plan report: {inputs.get('model')}",
                         f"from {path}: {inputs.get('workload')}, SLO "
                         f"{(inputs.get('slo') or {}).get('text')}", plan_sections(data))
    write_output(target, html, as_json=False)


def _workload(dataset: str | None, num_prompts: int | None, rate: float | None, prompt: int,
              output: int) -> object | None:
    """A workload only when one was asked for (--dataset or --num-prompts); --prompt and
    --output size the random dataset's requests (a trace brings its own lengths)."""
    from kvplan.errors import InputError

    if dataset is None and num_prompts is None:
        if rate is not None:  # else it would be dropped without a word
            raise InputError("--request-rate paces a simulation: give --num-prompts N (or "
                             "--dataset D) too, or drop --request-rate")
        return None
    from kvplan.specs.requests.workload import WorkloadArgs, check_dataset

    if dataset is not None:
        check_dataset(dataset, trace_flag=False)  # report has no --trace
    lens = ({"random_input_len": prompt, "random_output_len": output}
            if dataset in (None, "random") else {})
    return WorkloadArgs(dataset=dataset, num_prompts=num_prompts, request_rate=rate, **lens)


def _check_html_out(out: str, *inputs: str | None) -> OutputTarget:
    """Refuse a bad output before any work: not .html, a folder, a missing folder, an input."""
    from kvplan.cli.common import check_output
    from kvplan.errors import InputError

    if Path(out).suffix.lower() not in (".html", ".htm"):
        raise InputError(f"-o {out}: the report is HTML; use a name ending in .html")
    target = check_output(out, "-o", inputs)
    assert target is not None
    return target
