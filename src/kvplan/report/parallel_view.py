"""Capacity under data / expert parallelism: per DP rank and fleet totals, as text and JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.units import fmt_bytes

if TYPE_CHECKING:
    from kvplan.costs.memory.ep_layout import ParallelLayout
    from kvplan.costs.memory.plan import MemoryPlan
    from kvplan.specs.model import ModelSpec


def is_parallel(plan: MemoryPlan) -> bool:
    """Whether the plan has DP ranks or EP (else capacity prints exactly as before)."""
    return plan.settings.dp > 1 or plan.settings.expert_parallel


def _layout(plan: MemoryPlan, model: ModelSpec) -> ParallelLayout:
    from kvplan.costs.memory.ep_memory import layout_of

    return layout_of(model, plan.settings)


def ep_warning(plan: MemoryPlan, model: ModelSpec) -> str | None:
    """vLLM ignores --enable-expert-parallel where no MoE layer exists or one GPU runs it."""
    s = plan.settings
    if not s.expert_parallel:
        return None
    if model.moe is None:
        from kvplan.costs.step.parallel.dp_latency import ep_no_effect
        from kvplan.specs.serving import EngineConfig

        return ep_no_effect(model, EngineConfig(enable_expert_parallel=True))
    if s.tp * s.dp == 1:
        return "warning: --enable-expert-parallel has no effect on one GPU (tp x dp = 1)"
    return None


def table_stage(plan: MemoryPlan) -> int | None:
    """The pipeline stage whose budget the plan shows (the fewest blocks); None at PP 1."""
    return next((st for st, b, _ in plan.stages if b is plan.budget), None)


def parallel_json(plan: MemoryPlan, model: ModelSpec) -> dict[str, Any]:
    """The ``parallel`` object of ``capacity --json``: layout, per-rank and fleet figures."""
    from kvplan.costs.memory.ep_layout import expert_weight_bytes
    from kvplan.costs.memory.ep_memory import expert_padding_bytes
    from kvplan.specs.hardware import load_gpu

    lay, s = _layout(plan, model), plan.settings
    stage = table_stage(plan)
    experts = expert_weight_bytes(model, lay, dtype=s.dtype, quantization=s.quantization,
                                  stage=stage)
    experts += expert_padding_bytes(model, load_gpu(plan.gpu), s, lay, stage)
    return {
        "data_parallel_size": lay.dp, "expert_parallel": lay.expert_parallel,
        "expert_parallel_size": lay.ep, "expert_tensor_parallel_size": lay.moe_tp,
        "num_experts": lay.num_experts, "local_experts_per_gpu": lay.local_experts,
        "uneven_expert_split": lay.uneven_experts,
        "gpus_per_rank": lay.gpus_per_rank, "total_gpus": lay.total_gpus,
        "expert_weights_bytes_per_gpu": experts,
        "non_expert_weights_bytes_per_gpu": plan.budget.weights_bytes - experts,
        "kv_cache_bytes_per_rank": lay.tp * sum(
            b.available_kv_bytes for _, b, _ in plan.stages or ((0, plan.budget, ()),)),
        "kv_cache_tokens_per_rank": plan.kv_cache_tokens,
        "max_concurrency_per_rank": plan.max_concurrency,
        "kv_cache_tokens_fleet": plan.kv_cache_tokens * lay.dp,
        "max_concurrency_fleet": plan.max_concurrency * lay.dp,
    }


def parallel_lines(plan: MemoryPlan, model: ModelSpec) -> list[str]:
    """Lines after the per-GPU table: the layout, then per-rank and fleet totals."""
    doc, s = parallel_json(plan, model), plan.settings
    lines = [f"{doc['data_parallel_size']} DP ranks x {doc['gpus_per_rank']} GPUs (tp {s.tp}, "
             f"pp {s.pp}) = {doc['total_gpus']} GPUs; each DP rank is one engine with its own "
             "KV cache"]
    if model.moe is not None:
        split = (f"EP {doc['expert_parallel_size']}: {doc['local_experts_per_gpu']} of "
                 f"{doc['num_experts']} experts per GPU"
                 + (" (uneven: the first ranks hold one more)" if doc["uneven_expert_split"]
                    else "")
                 if doc["expert_parallel"]
                 else f"no EP: every expert TP-sharded over {doc['expert_tensor_parallel_size']}"
                      " GPUs")
        stage = table_stage(plan)
        where = "" if stage is None else f" of pipeline stage {stage} (the table's)"
        lines.append(f"routed experts: {split}; {fmt_bytes(doc['expert_weights_bytes_per_gpu'])}"
                     f" per GPU{where}; attention, dense, embeddings and rope cache "
                     f"{fmt_bytes(doc['non_expert_weights_bytes_per_gpu'])}")
    lines.append(f"per DP rank: KV cache {fmt_bytes(doc['kv_cache_bytes_per_rank'])} over "
                 f"{doc['gpus_per_rank']} GPUs, {doc['kv_cache_tokens_per_rank']:,} tokens, "
                 f"max concurrency {doc['max_concurrency_per_rank']:.2f}x")
    lines.append(f"fleet ({doc['data_parallel_size']} ranks): {doc['kv_cache_tokens_fleet']:,} "
                 f"tokens, max concurrency {doc['max_concurrency_fleet']:.2f}x")
    return lines


def parallel_latency_line(p: dict[str, Any]) -> str:
    """``latency``'s DP / EP line from ``parallel_latency_json``."""
    head = f"DP {p['data_parallel_size']}: {p['batch_per_rank']} requests per rank"
    if not p["enable_expert_parallel"]:
        return head + (f"; token exchange {p['all2all_backend']}"
                       if p["all2all_backend"] and p["data_parallel_size"] > 1
                       else "; each rank a plain replica")
    return (f"{head}; EP, token exchange {p['all2all_backend']}, expert imbalance "
            f"x{p['expert_imbalance']:.3f} (--expert-imbalance)")
