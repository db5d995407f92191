"""Text and JSON renderings of the cache commands (kv, request, batch)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Console

from kvplan.analysis.footprint import BatchFootprint, footprint_terms
from kvplan.analysis.kv_view import KvReport
from kvplan.analysis.timeline import RequestTimeline
from kvplan.report.explain import kv_summary_lines
from kvplan.report.notes import merged_notes
from kvplan.report.tables import kv_groups_table, timeline_table
from kvplan.specs.kv import ModelKv
from kvplan.units import counted, fmt_bytes


def render_kv(console: Console, r: KvReport) -> None:
    console.print(
        f"[bold]{r.model.name}[/bold] — {r.model.attention_kind}, "
        f"KV cache dtype {r.per_gpu.precision.name}"
    )
    console.print("Whole model (all layers, one copy):")
    for line in kv_summary_lines(r.whole):
        console.print(f"  {line}")
    tp = r.per_gpu.tensor_parallel_size
    if tp > 1:
        console.print(
            f"Per GPU at tensor parallel {tp} (KV heads per GPU = max(1, kv_heads // "
            f"{tp}); MLA latents are not split):"
        )
        for line in kv_summary_lines(r.per_gpu):
            console.print(f"  {line}")
    console.print(kv_groups_table(r.per_gpu, r.block_size))
    console.print(f"Precision risk: {r.risk}")
    for note in merged_notes(r.model.notes):
        console.print(f"note: {note}", style="dim", markup=False, highlight=False)


def timeline_json(model: str, kv: ModelKv, tl: RequestTimeline) -> dict[str, Any]:
    """Keys other tools read: prefill_bytes, decode_bytes, final_bytes, prefill_share, steps."""
    return {
        "model": model,
        "kv_cache_dtype": kv.precision.name,
        "tensor_parallel_size": kv.tensor_parallel_size,
        "prompt_tokens": tl.prompt_tokens,
        "output_tokens": tl.output_tokens,
        "chunk_tokens": tl.chunk_tokens,
        "block_size": tl.block_size,
        "bytes_per_token": kv.bytes_per_token,
        "prefill_steps": tl.prefill_steps,
        "prefill_bytes": tl.prefill_bytes,
        "decode_bytes": tl.decode_bytes,
        "final_bytes": tl.final_bytes,
        "final_allocated_bytes": tl.final_allocated_bytes,
        "prefill_share": tl.prefill_share,
        "vllm_final_tokens": tl.vllm_final.tokens_in_cache,
        "vllm_final_bytes": tl.vllm_final.logical_bytes,
        "steps": [
            {
                "step": s.step,
                "phase": s.phase,
                "tokens_in_cache": s.tokens_in_cache,
                "logical_bytes": s.logical_bytes,
                "claimed_bytes": s.claimed_bytes,
                "allocated_blocks": s.allocated_blocks,
                "allocated_bytes": s.allocated_bytes,
            }
            for s in tl.steps
        ],
    }


def render_timeline(console: Console, model: str, kv: ModelKv, tl: RequestTimeline) -> None:
    console.print(timeline_table(tl))
    per_gpu = f" per GPU at TP {kv.tensor_parallel_size}" if kv.tensor_parallel_size > 1 else ""
    console.print(f"{model}: {kv.bytes_per_token:,} bytes/token{per_gpu} ({kv.precision.name})")
    for line in timeline_lines(tl):
        console.print(line)


def timeline_lines(tl: RequestTimeline) -> list[str]:
    """The totals `kvplan request` prints under its table (the notebook shows them too)."""
    steps = "1 step" if tl.prefill_steps == 1 else f"{tl.prefill_steps} chunked steps"
    lines = [
        f"prefill claims {fmt_bytes(tl.prefill_bytes)} ({tl.prefill_bytes:,} bytes) "
        f"in {steps}; {counted(tl.output_tokens, 'decode step')} "
        f"{'adds' if tl.output_tokens == 1 else 'add'} {fmt_bytes(tl.decode_bytes)} "
        f"({tl.decode_bytes:,} bytes)",
        f"final cache {fmt_bytes(tl.final_bytes)} ({tl.final_bytes:,} bytes; "
        f"{fmt_bytes(tl.final_allocated_bytes)} allocated in blocks of {tl.block_size}); "
        f"prefill share {tl.prefill_share:.1%}",
    ]
    if tl.output_tokens:
        v = tl.vllm_final
        lines.append(
            f"vLLM samples the first output token in the prefill step and never caches the "
            f"last: it ends at {v.tokens_in_cache:,} token{'' if v.tokens_in_cache == 1 else 's'}, "
            f"{fmt_bytes(v.logical_bytes)} "
            f"({v.logical_bytes:,} bytes), after {counted(tl.output_tokens - 1, 'decode step')}"
        )
    return lines


def batch_json(model: str, fp: BatchFootprint) -> dict[str, Any]:
    return {
        "model": model,
        "kv_cache_dtype": fp.kv.precision.name,
        "tensor_parallel_size": fp.kv.tensor_parallel_size,
        "batch": fp.batch,
        "context_tokens": fp.context_tokens,
        "bytes_per_token": fp.kv.bytes_per_token,
        "bytes_per_request": fp.bytes_per_request,
        "total_bytes": fp.total_bytes,
        "terms": [{**dataclasses.asdict(t), "bytes": t.bytes} for t in footprint_terms(fp)],
    }


def batch_equation(fp: BatchFootprint) -> str:
    """bytes/token x tokens x requests, with one term per layer group when there are several
    (a sliding window holds fewer tokens, a state layer a fixed size), so it adds up."""
    from kvplan.analysis.footprint import footprint_terms

    terms = footprint_terms(fp)
    if len(terms) == 1 and not terms[0].state_bytes and terms[0].tokens_held == fp.context_tokens:
        t = terms[0]  # a window shorter than the context is named below, as in a mixed model
        return (f"{t.bytes_per_token:,} bytes/token x {t.tokens_held:,} tokens x "
                f"{counted(fp.batch, 'request')}")
    parts = [
        f"{t.state_bytes:,} bytes of state [{t.label}, {t.num_layers} layers]" if t.state_bytes
        else f"{t.bytes_per_token:,} bytes/token x {t.tokens_held:,} tokens "
             f"[{t.label}, {t.num_layers} layers]"
        for t in terms
    ]
    return f"({' + '.join(parts)}) x {counted(fp.batch, 'request')}"


def render_batch(console: Console, model: str, fp: BatchFootprint) -> None:
    console.print(
        f"{model}, KV cache dtype {fp.kv.precision.name}, tp {fp.kv.tensor_parallel_size} (per GPU)"
    )
    console.print(batch_equation(fp), markup=False)
    console.print(
        f"total: {fmt_bytes(fp.total_bytes)} ({fp.total_bytes:,} bytes); "
        f"{fmt_bytes(fp.bytes_per_request)} per request"
    )
