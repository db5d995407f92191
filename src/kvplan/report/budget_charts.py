"""Charts of the memory budget (stacked bar), the levers (bars) and a latency sweep (lines)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.analysis.footprint import LeverRow
    from kvplan.costs.memory.plan import MemoryPlan
    from kvplan.costs.step.latency import SweepRow

_PARTS = ("weights", "peak activation", "non-torch", "KV cache", "unrequested")
GIVEN_REST = "unused (--kv-cache-memory given)"
"""The rest of the GPU when --kv-cache-memory replaces the estimate: vLLM then leaves the
requested share's remainder unused, so it is no longer weights + activation + non-torch + KV."""


def budget_chart(plan: MemoryPlan) -> Any:
    """One stacked bar per GPU that adds up to its CUDA total: weights, activations, non-torch,
    KV, and the rest (outside the requested share, or unused beside a given KV size)."""
    import altair as alt

    b = plan.budget
    held = (b.weights_bytes, b.activation_bytes, b.non_torch_bytes, b.available_kv_bytes)
    parts = (*_PARTS[:4], GIVEN_REST if b.kv_cache_memory_given else _PARTS[4])
    values = (*held, max(b.cuda_total_bytes - sum(held), 0))
    rows = [{"part": p, "order": i, "GiB": v / GiB, "gpu": f"{plan.gpu} (one GPU)"}
            for i, (p, v) in enumerate(zip(parts, values, strict=True))]
    colors = alt.Scale(domain=list(parts),
                       range=["#4c78a8", "#f58518", "#b279a2", "#54a24b", "#dddddd"])
    title = (f"{plan.model} on {plan.gpu}: {plan.num_blocks:,} blocks, "
             f"{plan.kv_cache_tokens:,} tokens, {plan.max_concurrency:.2f}x concurrency")
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(  # type: ignore[no-untyped-call]
        x=alt.X("sum(GiB):Q", title="GiB (CUDA total)", stack="zero"),
        y=alt.Y("gpu:N", title=None),
        color=alt.Color("part:N", scale=colors, sort=list(parts),
                        legend=alt.Legend(title="budget", orient="bottom")),
        order=alt.Order("order:Q"),
        tooltip=["part:N", alt.Tooltip("GiB:Q", format=".2f")],
    ).properties(title=title, width=640, height=80)


def levers_chart(rows: Sequence[LeverRow], model_name: str) -> Any:
    """KV bytes per GPU for the batch under each lever, with the factor against MHA."""
    import altair as alt

    data = [{"lever": r.lever, "GiB": r.total_bytes_per_gpu / GiB,
             "factor": f"{r.factor_vs_baseline:.3g}x"} for r in rows]
    base = alt.Chart(alt.Data(values=data)).encode(  # type: ignore[no-untyped-call]
        y=alt.Y("lever:N", sort=None, title=None),
        x=alt.X("GiB:Q", title="KV cache per GPU for the batch (GiB)"),
    )
    bars = base.mark_bar(color="#4c78a8").encode(tooltip=["lever:N", "GiB:Q", "factor:N"])
    labels = base.mark_text(align="left", dx=4).encode(text="factor:N")
    return (bars + labels).properties(title=f"{model_name}: levers multiply", width=520)


def sweep_chart(lever: str, rows: Sequence[SweepRow]) -> Any:
    """TPOT and output throughput per lever value; where decode turns compute-bound and where
    the KV cache stops fitting are marked."""
    import altair as alt

    data = [_sweep_point(i, r) for i, r in enumerate(rows)]
    base = alt.Chart(alt.Data(values=data)).encode(  # type: ignore[no-untyped-call]
        x=alt.X("value:O", sort=None, title=lever))
    shape = alt.Shape("decode bound:N", legend=alt.Legend(orient="bottom"))
    fill = alt.Color("KV fits:N", scale=alt.Scale(domain=["yes", "no"],
                                                  range=["#54a24b", "#e45756"]),
                     legend=alt.Legend(orient="bottom"))
    tip = ["value:O", "TTFT (ms):Q", "TPOT (ms):Q", "throughput (tok/s):Q", "decode bound:N",
           "KV fits:N"]

    def panel(field: str) -> Any:
        line = base.mark_line(color="#999999").encode(y=alt.Y(f"{field}:Q"))
        pts = base.mark_point(size=70, filled=True).encode(
            y=f"{field}:Q", shape=shape, color=fill, tooltip=tip)
        return (line + pts).properties(width=300, height=240)

    # one output token everywhere: no TPOT to draw (an empty panel, 'Infinite extent'), TTFT is
    # the request's latency
    first = ("TPOT (ms)" if any(d["TPOT (ms)"] is not None for d in data)
             or not any(d["TTFT (ms)"] is not None for d in data) else "TTFT (ms)")
    return alt.hconcat(panel(first), panel("throughput (tok/s)")).properties(
        title=f"sweep of {lever}: point shape = decode bound, colour = KV cache fits")


def _sweep_point(i: int, r: SweepRow) -> dict[str, Any]:
    """One lever value's point. No TPOT (one output token): no point, not 0 ms. Weights that
    do not fit: no latency at all, as the sweep's table and JSON say ('weights do not fit: no
    latency'), so no point, not the latency of a model the GPU cannot load."""
    res = r.result if r.weights_fit else None
    return {"value": r.value, "order": i,
            "TPOT (ms)": None if res is None or res.tpot_s is None else res.tpot_s * 1e3,
            "TTFT (ms)": None if res is None else res.ttft_s * 1e3,
            "throughput (tok/s)": None if res is None else res.output_throughput_tok_s,
            "decode bound": (res.decode_bound if res else None) or "-",
            "KV fits": "yes" if r.fits else "no"}
