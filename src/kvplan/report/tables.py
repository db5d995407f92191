"""Rich tables for the cache commands (models, kv groups, claim steps, levers)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from kvplan.analysis.catalog_view import ModelRow
from kvplan.analysis.footprint import LeverRow
from kvplan.analysis.timeline import RequestTimeline
from kvplan.specs.kv import ModelKv
from kvplan.units import fmt_bytes


def models_table(rows: Sequence[ModelRow]) -> Table:
    table = Table(title="Bundled models (KV cache at the model's own dtype, tp=1)")
    for col in (
        "model",
        "attention",
        "layers",
        "kv heads",
        "head_dim",
        "dtype",
        "KV per token",
        "state per request",
    ):
        table.add_column(col, justify="left" if col in ("model", "attention") else "right")
    for r in rows:
        state = fmt_bytes(r.state_bytes_per_request) if r.state_bytes_per_request else "-"
        table.add_row(
            r.id,
            r.attention,
            str(r.layers),
            str(r.kv_heads),
            str(r.head_dim),
            r.dtype,
            fmt_bytes(r.bytes_per_token),
            state,
        )
    return table


def kv_groups_table(kv: ModelKv, block_size: int) -> Table:
    table = Table(
        title=f"Layer groups on one GPU (tp={kv.tensor_parallel_size}, "
        f"{kv.precision.name}, block {block_size})"
    )
    for col in (
        "group",
        "layers",
        "per layer / token",
        "group / token",
        "page (1 layer)",
        "state / request",
    ):
        table.add_column(col, justify="left" if col == "group" else "right")
    for g in kv.groups:
        table.add_row(
            g.spec.label,
            str(g.num_layers),
            f"{g.spec.bytes_per_token:,} B",
            fmt_bytes(g.bytes_per_token) if g.bytes_per_token else "-",
            fmt_bytes(g.spec.page_size_bytes(block_size)),
            fmt_bytes(g.state_bytes) if g.state_bytes else "-",
        )
    return table


def timeline_table(tl: RequestTimeline, max_rows: int = 12) -> Table:
    """Prefill steps and the first/last decode steps (middle elided)."""
    table = Table(
        title=f"Claim schedule: prompt {tl.prompt_tokens}, output {tl.output_tokens}"
        f"{f', chunk {tl.chunk_tokens}' if tl.chunk_tokens else ''}, "
        f"block {tl.block_size}"
    )
    for col in ("step", "phase", "tokens", "logical", "claimed", "blocks", "allocated"):
        table.add_column(col, justify="right")
    steps = tl.steps
    shown = steps if len(steps) <= max_rows else steps[: max_rows - 3] + steps[-2:]
    for i, s in enumerate(shown):
        if len(steps) > max_rows and i == max_rows - 3:
            table.add_row("...", "", "", "", "", "", "")
        table.add_row(
            str(s.step),
            s.phase,
            f"{s.tokens_in_cache:,}",
            fmt_bytes(s.logical_bytes),
            fmt_bytes(s.claimed_bytes),
            f"{s.allocated_blocks:,}",
            fmt_bytes(s.allocated_bytes),
        )
    return table


def levers_table(rows: Sequence[LeverRow], batch: int, context: int) -> Table:
    table = Table(title=f"Levers on the KV footprint: batch {batch} x {context} tokens, per GPU")
    for col in (
        "lever",
        "kv heads",
        "cache dtype",
        "tp",
        "per token / GPU",
        "total / GPU",
        "x baseline",
    ):
        table.add_column(col, justify="left" if col in ("lever", "kv heads") else "right")
    for r in rows:
        table.add_row(
            r.lever,
            r.kv_heads,
            r.precision,
            str(r.tensor_parallel_size),
            fmt_bytes(r.bytes_per_token_per_gpu),
            fmt_bytes(r.total_bytes_per_gpu),
            f"{r.factor_vs_baseline:.4f}",
        )
    return table
