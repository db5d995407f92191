"""KV cache sizes the user gives: --kv-cache-memory (vLLM's ``kv_cache_memory_bytes``) against
the GPU's whole memory, and --num-gpu-blocks-override against the memory vLLM found free.

vLLM 0.11 then skips the budget (``gpu_memory_utilization`` is not applied) but still loads
the weights, runs the profiling pass and allocates exactly that much KV cache: the given
size has to fit beside them on the GPU, or vLLM runs out of memory while starting::

    weights + non_torch + max(peak activation, kv_cache_memory) <= cuda_total

(the profiling pass's activations are freed before the KV cache is allocated)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from kvplan.units import fmt_bytes

if TYPE_CHECKING:
    from kvplan.costs.memory.plan import MemoryPlan


class _Budget(Protocol):
    """The fields of ``costs.memory.plan.Budget`` read here (read-only)."""

    @property
    def cuda_total_bytes(self) -> int: ...
    @property
    def weights_bytes(self) -> int: ...
    @property
    def activation_bytes(self) -> int: ...
    @property
    def non_torch_bytes(self) -> int: ...
    @property
    def available_kv_bytes(self) -> int: ...
    @property
    def kv_cache_memory_given(self) -> bool: ...


def given_kv_overflow(b: _Budget) -> int:
    """Bytes by which a given --kv-cache-memory overflows the GPU (0: it fits, or not given)."""
    if not b.kv_cache_memory_given:
        return 0
    peak = b.weights_bytes + b.non_torch_bytes + max(b.activation_bytes, b.available_kv_bytes)
    return max(0, peak - b.cuda_total_bytes)


def given_kv_warning(budgets: Iterable[_Budget], gpu_id: str) -> str | None:
    """One ``warning:`` line when a given --kv-cache-memory does not fit beside the weights
    on some GPU (the fullest one is named), else None."""
    worst = max(budgets, key=given_kv_overflow)
    if given_kv_overflow(worst) == 0:
        return None
    room = worst.cuda_total_bytes - worst.weights_bytes - worst.non_torch_bytes
    most = (f"at most {fmt_bytes(room)} of KV cache fits beside them" if room > 0 else
            "the weights alone do not fit")
    return (f"warning: --kv-cache-memory {fmt_bytes(worst.available_kv_bytes)} does not fit on "
            f"{gpu_id}: weights {fmt_bytes(worst.weights_bytes)} + non-torch "
            f"{fmt_bytes(worst.non_torch_bytes)} + max(KV cache, peak activation "
            f"{fmt_bytes(worst.activation_bytes)}) exceed its "
            f"{fmt_bytes(worst.cuda_total_bytes)} (CUDA total), so vLLM runs out of memory "
            f"starting; {most}")


def override_log(plan: MemoryPlan) -> str:
    """vLLM 0.11's INFO line when --num-gpu-blocks-override replaced the block count
    (``may_override_num_blocks``), else ''."""
    given = plan.settings.num_gpu_blocks_override
    if given is None:
        return ""
    return (f"Overriding num_gpu_blocks={plan.blocks_from_memory} with "
            f"num_gpu_blocks_override={given}")


def override_warning(plan: MemoryPlan) -> str | None:
    """One ``warning:`` line when the overridden blocks take more memory than vLLM found free
    for the KV cache on some GPU (vLLM allocates them anyway: num_blocks x page x layers per
    group), else None."""
    blocks = plan.settings.num_gpu_blocks_override
    if blocks is None:
        return None
    for stage, b, groups in plan.stages or ((0, plan.budget, plan.groups),):
        need = blocks * plan.page_size_bytes * max(len(g.layer_ids) for g in groups)
        if need > b.available_kv_bytes:
            where = f" on pipeline stage {stage}" if plan.stages else ""
            return (f"warning: --num-gpu-blocks-override {blocks:,} allocates "
                    f"{fmt_bytes(need)} of KV cache{where}, more than the "
                    f"{fmt_bytes(b.available_kv_bytes)} vLLM found free for it; vLLM may run "
                    "out of memory")
    return None


def plan_warnings(plan: MemoryPlan) -> list[str]:
    """The ``warning:`` lines of a plan built from user-given KV sizes (capacity prints them;
    simulate too, as it serves on that plan's blocks)."""
    got = (given_kv_warning([b for _, b, _ in plan.stages] or [plan.budget], plan.gpu),
           override_warning(plan))
    return [w for w in got if w is not None]
