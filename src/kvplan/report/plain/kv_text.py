"""``kvplan kv``'s text without rich: the groups table's cells (rich's table is built from the
same cells) and the whole answer as plain text for a pipe."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.report.explain import kv_summary_lines
from kvplan.report.notes import merged_notes
from kvplan.report.plain.table import PlainTable, plain_line, render_table
from kvplan.units import fmt_bytes

if TYPE_CHECKING:
    from kvplan.analysis.kv_view import KvReport
    from kvplan.specs.kv import ModelKv

KV_GROUP_HEADERS = ("group", "layers", "per layer / token", "group / token", "page (1 layer)",
                    "state / request")


def kv_groups_cells(kv: ModelKv, block_size: int) -> PlainTable:
    """One row per KV group: label, layers, bytes per layer and group per token, page, state."""
    rows = tuple(
        (g.spec.label, str(g.num_layers), f"{g.spec.bytes_per_token:,} B",
         fmt_bytes(g.bytes_per_token) if g.bytes_per_token else "-",
         fmt_bytes(g.spec.page_size_bytes(block_size)),
         fmt_bytes(g.state_bytes) if g.state_bytes else "-")
        for g in kv.groups)
    return PlainTable(
        title=f"Layer groups on one GPU (tp={kv.tensor_parallel_size}, {kv.precision.name}, "
        f"block {block_size})",
        headers=KV_GROUP_HEADERS,
        justify=tuple("left" if h == "group" else "right" for h in KV_GROUP_HEADERS),
        rows=rows)


def kv_lines(r: KvReport) -> tuple[list[str], list[str]]:
    """The lines before the groups table and those after it (render.render_kv's text)."""
    head = [f"{r.model.name} — {r.model.attention_kind}, "
            f"KV cache dtype {r.per_gpu.precision.name}", "Whole model (all layers, one copy):"]
    head += [f"  {line}" for line in kv_summary_lines(r.whole)]
    tp = r.per_gpu.tensor_parallel_size
    if tp > 1:
        head.append(f"Per GPU at tensor parallel {tp} (KV heads per GPU = max(1, kv_heads // "
                    f"{tp}); MLA latents are not split):")
        head += [f"  {line}" for line in kv_summary_lines(r.per_gpu)]
    tail = [f"Precision risk: {r.risk}"]
    tail += [f"note: {note}" for note in merged_notes(r.model.notes)]
    return head, tail


def kv_text(r: KvReport, width: int) -> str | None:
    """The whole ``kvplan kv`` text as rich prints it on a pipe ``width`` wide, or None
    where rich must print it (a line it would wrap, markup in a name, wide characters)."""
    head, tail = kv_lines(r)
    table = render_table(kv_groups_cells(r.per_gpu, r.block_size), width)
    lines = [plain_line(x, width) for x in (*head, *tail)]
    if table is None or any(x is None for x in lines):
        return None
    done = [x for x in lines if x is not None]
    return "".join(done[:len(head)]) + table + "".join(done[len(head):])
