"""``kvplan kv``'s work, shared by the typer command and the fast path (no typer, and no rich
on a pipe)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any


def kv_answer(model: str, settings: Mapping[str, Any], as_json: bool) -> None:
    """Print the model's KV bytes per token (text, or one JSON object) for parsed settings."""
    from kvplan.analysis.kv_view import kv_report, mla_block_note
    from kvplan.cli.engine import resolve_engine
    from kvplan.specs.catalog import load_model

    spec = load_model(model)
    engine = resolve_engine(settings, spec)
    report = kv_report(spec, engine.kv_cache_dtype, engine.tensor_parallel_size, engine.block_size)
    mla_block_note(spec, settings.get("block_size"))
    if as_json:
        from kvplan.report.json_out import dumps
        from kvplan.report.json_views import kv_json

        print(dumps(kv_json(report)))
        return
    from kvplan.report.plain.table import plain_width

    width = plain_width()
    if width is not None:
        from kvplan.report.plain.kv_text import kv_text

        text = kv_text(report, width)
        if text is not None:
            sys.stdout.write(text)
            return
    from kvplan.cli.common import console
    from kvplan.report.render import render_kv

    render_kv(console, report)
