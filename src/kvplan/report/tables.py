"""Rich tables for the cache commands (models, kv groups, claim steps, levers)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from kvplan.analysis.catalog_view import ModelRow
from kvplan.analysis.footprint import LeverRow
from kvplan.analysis.timeline import RequestTimeline
from kvplan.report.plain.kv_text import kv_groups_cells
from kvplan.specs.kv import ModelKv
from kvplan.units import fmt_bytes

_SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def short_attention(kind: str) -> str:
    """'GQA + sliding-window (mixed local/global)' -> 'GQA + SWA (mixed)', for narrow tables."""
    return (kind.replace("sliding-window", "SWA").replace("state layers", "state")
            .replace("(mixed local/global)", "(mixed)").replace(" (hybrid)", ""))


def models_table(rows: Sequence[ModelRow]) -> Table:
    """The catalog; ids never wrap or shorten (other columns fold first), MLA shows its latent
    (``--json`` has the full attention names)."""
    from rich import box

    from kvplan.specs.catalog.derived import listed

    table = Table(title="Bundled models (KV cache at the model's own dtype, tp=1)",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  caption="Also accepted: their Instruct/chat variants, and "
                  + ", ".join(d.id for d in listed()) + " (README: how a MODEL is looked up)")
    widest = max((len(r.id) for r in rows), default=5)
    table.add_column("model", no_wrap=True, min_width=widest)
    table.add_column("attention", overflow="fold")
    for col in ("layers", "KV heads x dim", "dtype", "KV/token", "state/req"):
        table.add_column(col, justify="right", overflow="fold", min_width=4)
    for r in rows:
        state = fmt_bytes(r.state_bytes_per_request) if r.state_bytes_per_request else "-"
        heads = (f"latent {r.latent_dim} ({r.latent_parts})" if r.latent_dim
                 else f"{r.kv_heads}x{r.head_dim}")
        table.add_row(r.id, short_attention(r.attention), str(r.layers), heads,
                      _SHORT_DTYPE.get(r.dtype, r.dtype), fmt_bytes(r.bytes_per_token), state)
    return table


def kv_groups_table(kv: ModelKv, block_size: int) -> Table:
    cells = kv_groups_cells(kv, block_size)
    table = Table(title=cells.title)
    for col, justify in zip(cells.headers, cells.justify, strict=True):
        table.add_column(col, justify="left" if justify == "left" else "right")
    for row in cells.rows:
        table.add_row(*row)
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
