"""The `kvplan capacity` answer as rich renderables: the memory budget table and vLLM's
own lines (KV cache memory, groups and blocks, "GPU KV cache size", maximum concurrency)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.costs.memory.plan import MemoryPlan


def capacity_renderables(plan: MemoryPlan) -> list[Any]:
    """What `kvplan capacity` prints for ``plan``, in order (a table, then text lines)."""
    from rich.table import Table

    from kvplan.costs.memory.given_kv import override_log
    from kvplan.report.json_views import vllm_version
    from kvplan.units import GiB, fmt_bytes

    b, s = plan.budget, plan.settings
    table = Table(title=f"{plan.model} on {plan.gpu} (TP {s.tp}, PP {s.pp}), "
                        f"vLLM {vllm_version()}")
    table.add_column("per GPU")
    table.add_column("memory", justify="right")
    rows = [
        ("CUDA total", b.cuda_total_bytes),
        (f"requested (x {s.gpu_memory_utilization})", b.requested_bytes),
        ("- weights", b.weights_bytes),
        ("- peak activation", b.activation_bytes),
        ("- non-torch", b.non_torch_bytes),
        ("= KV cache", b.available_kv_bytes),
        ("CUDA graphs (--enforce-eager: none)" if s.enforce_eager else
         "CUDA graphs (after, not subtracted)", b.cudagraph_bytes),
    ]
    for label, value in rows:
        table.add_row(label, fmt_bytes(value))
    given = " (given by --kv-cache-memory)" if b.kv_cache_memory_given else ""
    lines: list[Any] = [  # vLLM's gpu_worker.py: "Available KV cache memory: %.2f GiB"
        table, f"Available KV cache memory: {b.available_kv_bytes / GiB:.2f} GiB{given}",
        f"{len(plan.groups)} KV cache groups of {plan.layers_per_group} layers "
        f"({plan.num_padding_layers} padding), block {plan.block_size} tokens, "
        f"{plan.num_blocks:,} blocks"]
    if s.block_size_log:  # vLLM's own line: an MLA backend replaced --block-size
        lines.append(s.block_size_log)
    if s.quantization_note:
        lines.append(f"note: {s.quantization_note}")
    if override_log(plan):  # vLLM's own line: --num-gpu-blocks-override replaced the count
        lines.append(override_log(plan))
    return lines + _hybrid_lines(plan) + token_lines(plan)


def _hybrid_lines(plan: MemoryPlan) -> list[str]:
    h = plan.hybrid
    if h is None:
        return []
    from kvplan.costs.memory.vllm_defaults import DEFAULT_BLOCK_SIZE

    out = []
    asked = plan.settings.block_size  # the default is read as vLLM's unset block (None)
    if asked < h.aligned_block_size or asked == DEFAULT_BLOCK_SIZE:  # vLLM: None or < attn
        out.append(f"Setting attention block size to {h.block_size} tokens to ensure that "
                   "attention page size is >= mamba page size.")
    if h.page_size_padded is not None:
        out.append(f"Padding mamba page size by {h.padding_pct:.2f}% to ensure that "
                   "mamba page size and attention page size are exactly equal.")
    return out


def token_lines(plan: MemoryPlan) -> list[str]:
    """vLLM 0.11's "GPU KV cache size" and concurrency lines (+ the later token count)."""
    out = [f"GPU KV cache size: {plan.kv_cache_tokens:,} tokens"]
    if plan.kv_cache_tokens_newer_vllm != plan.kv_cache_tokens:
        out.append(f"  (later vLLM, v0.24+, prints {plan.kv_cache_tokens_newer_vllm:,} tokens: "
                   "max concurrency x max_model_len)")
    out.append(f"Maximum concurrency for {plan.settings.max_model_len:,} tokens per request: "
               f"{plan.max_concurrency:.2f}x")
    return out
