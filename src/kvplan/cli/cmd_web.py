"""Commands for the browser: web (the local page) and report (one self-contained HTML file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.common import console


@app.command("web")
def web_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    max_sim_requests: Annotated[int, typer.Option(
        "--max-sim-requests", help="Requests one page simulation may hold.")] = 2000,
    max_sim_seconds: Annotated[float, typer.Option(
        "--max-sim-seconds", help="Wall time one page simulation may take.")] = 60.0,
) -> None:
    """Serve the web page (Model, Request, Capacity, Latency, Simulate) and its JSON API."""
    from kvplan.errors import InputError
    from kvplan.web.app import serve
    from kvplan.web.settings import WebSettings

    if not 0 < port < 65536:
        raise InputError(f"--port must be in 1..65535, got {port}")
    if max_sim_requests < 1 or max_sim_seconds <= 0:
        raise InputError("--max-sim-requests and --max-sim-seconds must be positive")
    settings = WebSettings(max_sim_requests=max_sim_requests, max_sim_seconds=max_sim_seconds)
    console.print(f"kvplan web: open http://{host}:{port}/ (API docs at /docs); Ctrl-C stops")
    serve(host, port, settings)


@app.command("report")
def report_cmd(
    model: Annotated[str, typer.Argument(help="Catalog id or config.json path.")],
    out: Annotated[str, typer.Option("-o", "--output-file", help="The HTML file to write.")],
    gpu: Annotated[str, typer.Option("--gpu", help="GPU id from 'kvplan gpus'.")] = "H100",
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt tokens per request.")] = 2048,
    output: Annotated[int, typer.Option("--output", help="Output tokens per request.")] = 256,
    batch: Annotated[int, typer.Option("--batch", help="Requests started together.")] = 16,
    tensor_parallel_size: fl.TpOpt = None, kv_cache_dtype: fl.KvDtypeOpt = None,
    max_model_len: fl.MaxLenOpt = None, block_size: fl.BlockOpt = None,
    gpu_memory_utilization: fl.GpuUtilOpt = None, max_num_batched_tokens: fl.BatchedOpt = None,
    dataset: Annotated[str | None, typer.Option(
        "--dataset", help="Also simulate: random or a bundled trace.")] = None,
    num_prompts: Annotated[int | None, typer.Option("--num-prompts")] = None,
    request_rate: Annotated[float | None, typer.Option("--request-rate")] = None,
) -> None:
    """One self-contained HTML file (data, charts, scripts inline) that opens offline."""
    from kvplan.costs.latency import RequestShape
    from kvplan.report.html import render_report
    from kvplan.report.report_page import report_sections
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu

    path = _check_html_out(out)
    spec, hw = load_model(model), load_gpu(gpu)
    engine = fl.resolve_engine(fl.engine_settings(locals()), spec)
    shape = RequestShape(batch=batch, prompt_tokens=prompt, output_tokens=output)
    workload = _workload(dataset, num_prompts, request_rate, prompt, output)
    sections = report_sections(spec, hw, engine, shape, workload)
    html = render_report(f"kvplan report: {spec.name} on {hw.id}",
                         f"batch {batch}, prompt {prompt}, output {output} tokens; "
                         f"TP {engine.tensor_parallel_size}, KV cache {engine.kv_cache_dtype}",
                         sections)
    _write_atomic(path, html)
    console.print(f"wrote {path} ({len(html.encode()) / 2**20:.1f} MiB, {len(sections)} sections)")


def _workload(dataset: str | None, num_prompts: int | None, rate: float | None, prompt: int,
              output: int) -> object | None:
    """A workload only when one was asked for (--dataset or --num-prompts)."""
    if dataset is None and num_prompts is None:
        return None
    from kvplan.specs.workload import WorkloadArgs

    return WorkloadArgs(dataset=dataset, num_prompts=num_prompts, request_rate=rate,
                        random_input_len=prompt, random_output_len=output)


def _check_html_out(out: str) -> Path:
    """Refuse a bad output name before any work: .html, an existing folder, not a folder."""
    from kvplan.errors import InputError

    path = Path(out)
    if path.suffix.lower() not in (".html", ".htm"):
        raise InputError(f"-o {out}: the report is HTML; use a name ending in .html")
    if path.is_dir():
        raise InputError(f"-o {out} is a directory; give a file name")
    if not path.parent.exists():
        raise InputError(f"-o {out}: folder {path.parent} does not exist")
    return path


def _write_atomic(path: Path, text: str) -> None:
    """Write beside the target, then rename: a failed run leaves the old file whole."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
