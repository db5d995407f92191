"""Commands about the model and its cache: models, kv, request, batch, levers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.common import console, print_json

if TYPE_CHECKING:
    from kvplan.specs.model import ModelSpec
    from kvplan.specs.serving import EngineConfig

"""TP degrees the lever table tries; those vLLM refuses for the model are left out."""



@app.command("models")
def models_cmd(as_json: fl.JsonOpt = False) -> None:
    """List the bundled model catalog (Hugging Face ids, attention kind, cache per token)."""
    from kvplan.analysis.catalog_view import catalog_rows
    from kvplan.report.tables import models_table

    if as_json:
        from kvplan.report.json_views import models_json

        print_json(models_json())
        return
    rows = catalog_rows()
    console.print(models_table(rows))


ModelArg = Annotated[
    str, typer.Argument(help="Hugging Face id from 'kvplan models', or a path to a config.json.")
]
@app.command("kv")
def kv_cmd(
    model: ModelArg,
    kv_cache_dtype: fl.KvDtypeOpt = None,
    tensor_parallel_size: fl.TpOpt = None,
    block_size: fl.BlockOpt = None,
    as_json: fl.JsonOpt = False,
) -> None:
    """KV cache bytes per token, whole model and per GPU, with the formula filled in."""
    from kvplan.cli.fast.kv_answer import kv_answer

    kv_answer(model, fl.engine_settings(locals()), as_json)


@app.command("request")
def request_cmd(
    model: ModelArg,
    prompt: Annotated[int, typer.Option("--prompt", help="Prompt tokens (P).")],
    output: Annotated[int, typer.Option("--output", help="Output tokens (O).")],
    chunk: Annotated[int | None, typer.Option("--chunk", help="Chunked-prefill size C.")] = None,
    block_size: fl.BlockOpt = None,
    kv_cache_dtype: fl.KvDtypeOpt = None,
    tensor_parallel_size: fl.TpOpt = None,
    plot: Annotated[
        str | None, typer.Option("--plot", help="Write the staircase chart (.png, .svg or .html).")
    ] = None,
    as_json: fl.JsonOpt = False,
) -> None:
    """A request's memory-claim schedule: prefill jump, chunk staircase, decode trickle."""
    from kvplan.analysis.timeline import request_timeline
    from kvplan.cli.common import check_output, write_output
    from kvplan.report.charts import check_chart_path
    from kvplan.specs.kv import kv_spec

    out = check_output(plot and check_chart_path(plot), "--plot", [model])
    spec, engine = _model_engine(model, fl.engine_settings(locals()))
    kv = kv_spec(spec, engine.kv_cache_dtype, engine.tensor_parallel_size)
    tl = request_timeline(kv, prompt, output, chunk_tokens=chunk, block_size=engine.block_size,
                          max_tokens=spec.context_limit)
    _mla_block_note(spec, block_size)  # after the checks: an error is one line
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


def _mla_block_note(spec: Any, block_size: int | None) -> None:
    """``request`` knows no GPU: say which block size vLLM forces for MLA where it does."""
    from kvplan.analysis.kv_view import mla_block_note

    mla_block_note(spec, block_size)


@app.command("batch")
def batch_cmd(
    model: ModelArg,
    batch: Annotated[int, typer.Option("--batch", help="Concurrent requests.")],
    context: Annotated[int, typer.Option("--context", help="Tokens held by each request.")],
    kv_cache_dtype: fl.KvDtypeOpt = None,
    tensor_parallel_size: fl.TpOpt = None,
    as_json: fl.JsonOpt = False,
) -> None:
    """A batch's KV footprint: bytes per token x context x batch (windows and state applied)."""
    from kvplan.analysis.footprint import batch_footprint
    from kvplan.specs.kv import kv_spec

    spec, engine = _model_engine(model, fl.engine_settings(locals()))
    kv = kv_spec(spec, engine.kv_cache_dtype, engine.tensor_parallel_size)
    fp = batch_footprint(kv, batch, context, spec.context_limit)
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
    as_json: fl.JsonOpt = False,
) -> None:
    """How each lever (MHA vs GQA/MLA, cache dtype, TP) multiplies the footprint; they stack."""
    from kvplan.analysis.footprint import lever_table, levers_note, servable_tp_degrees
    from kvplan.specs.catalog import load_model

    spec = load_model(model)
    rows = lever_table(spec, batch, context, tp_degrees=servable_tp_degrees(spec))
    if as_json:
        from kvplan.report.json_views import levers_json

        print_json(levers_json(spec.name, batch, context, rows))
        return
    from kvplan.report.tables import levers_table

    console.print(levers_table(rows, batch, context))
    console.print(levers_note(spec))


def _model_engine(model: str, settings: dict[str, Any]) -> tuple[ModelSpec, EngineConfig]:
    """The model and its engine flags, TP checked with vLLM's rule as every command does."""
    from kvplan.specs.catalog import load_model

    spec = load_model(model)
    return spec, fl.resolve_engine(settings, spec)
