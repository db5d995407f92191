"""Commands about the model and its cache: models, kv, request, batch, levers."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.app import app
from kvplan.cli.common import console, print_json

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object and nothing else.")]


@app.command("models")
def models_cmd(as_json: JsonOpt = False) -> None:
    """List the bundled model catalog (Hugging Face ids, attention kind, cache per token)."""
    from kvplan.analysis.catalog_view import catalog_rows
    from kvplan.report.tables import models_table

    rows = catalog_rows()
    if as_json:
        print_json({"models": [r._asdict() for r in rows]})
        return
    console.print(models_table(rows))


ModelArg = Annotated[
    str, typer.Argument(help="Hugging Face id from 'kvplan models', or a path to a config.json.")
]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-cache-dtype",
        help="auto, bfloat16, float16, "
        "fp8, fp8_e4m3, fp8_e5m2, int8_per_token_head, "
        "fp8_per_token_head, nvfp4",
    ),
]
TpOpt = Annotated[int, typer.Option("--tensor-parallel-size", "-tp", help="Tensor-parallel GPUs.")]


@app.command("kv")
def kv_cmd(
    model: ModelArg,
    kv_cache_dtype: KvDtypeOpt = "auto",
    tensor_parallel_size: TpOpt = 1,
    block_size: Annotated[int, typer.Option("--block-size")] = 16,
    as_json: JsonOpt = False,
) -> None:
    """KV cache bytes per token, whole model and per GPU, with the formula filled in."""
    from kvplan.analysis.kv_view import kv_report

    report = kv_report(model, kv_cache_dtype, tensor_parallel_size, block_size)
    if as_json:
        print_json(report.to_json())
        return
    from kvplan.report.render import render_kv

    render_kv(console, report)


@app.command("request")
def request_cmd(
    model: ModelArg,
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt tokens (P).")],
    output: Annotated[int, typer.Option("--output", help="Output tokens (O).")],
    chunk: Annotated[int | None, typer.Option("--chunk", help="Chunked-prefill size C.")] = None,
    block_size: Annotated[int, typer.Option("--block-size")] = 16,
    kv_cache_dtype: KvDtypeOpt = "auto",
    tensor_parallel_size: TpOpt = 1,
    plot: Annotated[
        str | None, typer.Option("--plot", help="Write the staircase chart (.png, .svg or .html).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """A request's memory-claim schedule: prefill jump, chunk staircase, decode trickle."""
    from kvplan.analysis.timeline import request_timeline
    from kvplan.cli.common import check_output, write_output
    from kvplan.report.charts import check_chart_path
    from kvplan.specs.catalog import load_model
    from kvplan.specs.kv import kv_spec

    out = check_output(plot and check_chart_path(plot), "--plot", [model])
    spec = load_model(model)
    kv = kv_spec(spec, kv_cache_dtype, tensor_parallel_size)
    tl = request_timeline(kv, prompt, output, chunk_tokens=chunk, block_size=block_size,
                          max_tokens=spec.max_position_embeddings)
    if out is not None:
        from kvplan.report.charts import chart_bytes, staircase_chart

        write_output(out, chart_bytes(staircase_chart(tl, spec.name), out.path.suffix),
                     as_json=as_json)
    if as_json:
        from kvplan.report.render import timeline_json

        print_json(timeline_json(spec.name, kv, tl))
        return
    from kvplan.report.render import render_timeline

    render_timeline(console, spec.name, kv, tl)


@app.command("batch")
def batch_cmd(
    model: ModelArg,
    batch: Annotated[int, typer.Option("--batch", help="Concurrent requests.")],
    context: Annotated[int, typer.Option("--context", help="Tokens held by each request.")],
    kv_cache_dtype: KvDtypeOpt = "auto",
    tensor_parallel_size: TpOpt = 1,
    as_json: JsonOpt = False,
) -> None:
    """A batch's KV footprint: bytes per token x context x batch (windows and state applied)."""
    from kvplan.analysis.footprint import batch_footprint
    from kvplan.specs.catalog import load_model
    from kvplan.specs.kv import kv_spec

    spec = load_model(model)
    kv = kv_spec(spec, kv_cache_dtype, tensor_parallel_size)
    fp = batch_footprint(kv, batch, context, spec.max_position_embeddings)
    if as_json:
        from kvplan.report.render import batch_json

        print_json(batch_json(spec.name, fp))
        return
    from kvplan.report.render import render_batch

    render_batch(console, spec.name, fp)


@app.command("levers")
def levers_cmd(
    model: ModelArg,
    batch: Annotated[int, typer.Option("--batch", help="Concurrent requests.")],
    context: Annotated[int, typer.Option("--context", help="Tokens held by each request.")],
    as_json: JsonOpt = False,
) -> None:
    """How each lever (MHA vs GQA/MLA, cache dtype, TP) multiplies the footprint; they stack."""
    from kvplan.analysis.footprint import lever_table
    from kvplan.specs.catalog import load_model

    spec = load_model(model)
    rows = lever_table(spec, batch, context)
    if as_json:
        print_json(
            {
                "model": spec.name,
                "batch": batch,
                "context_tokens": context,
                "levers": [_lever_json(r) for r in rows],
            }
        )
        return
    from kvplan.report.tables import levers_table

    console.print(levers_table(rows, batch, context))
    console.print(
        "Factors multiply: GQA/MLA x cache precision x 1/TP (until TP exceeds the KV "
        "heads, where heads are replicated instead of split)."
    )


def _lever_json(row: object) -> dict[str, object]:
    import dataclasses

    return dataclasses.asdict(row)  # type: ignore[call-overload, no-any-return]
