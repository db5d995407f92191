"""The per-op view of one prefill and one decode step (``kvplan latency --explain``): a text
table and its JSON form."""

from __future__ import annotations

from typing import Any

from kvplan.costs.step.explain import StepOps


def ops_view(spec: Any, hw: Any, engine: Any, prof: Any, shape: Any,
             resolved: Any = None) -> tuple[str, Any]:
    """Which tables an answer stands on, and one prefill + one decode step op by op
    (``resolved``: the deployment's flags resolved once, or None)."""
    from kvplan.costs.step.explain import explain_steps, kernel_basis
    from kvplan.costs.step.roofline import StepCostModel

    timer = StepCostModel(spec, hw, engine, prof, resolved=resolved)
    steps = explain_steps(timer, shape.batch, shape.prompt_tokens,
                          engine.max_num_batched_tokens)
    return kernel_basis(timer), steps


def step_ops_json(steps: tuple[StepOps, ...]) -> list[dict[str, Any]]:
    """Each step's ops with their seconds (JSON: seconds in ``_s`` fields; ``extrapolated``:
    the op's time stands past the measured range)."""
    return [{"phase": s.phase, "tokens": s.tokens, "requests": s.requests,
             "context_tokens": s.context_tokens, "step_s": s.step_s,
             "kernels_s": s.kernels_s,
             "ops": [{"op": o.op, "layers": o.count, "shape": o.shape, "seconds": o.seconds,
                      "extrapolated": o.extrapolated} for o in s.ops]} for s in steps]


def step_ops_tables(steps: tuple[StepOps, ...]) -> list[Any]:
    """One rich table per step: op, layers, shape, time, share of the step."""
    from rich.table import Table

    from kvplan.units import fmt_seconds

    out = []
    for s in steps:
        reqs = f"{s.requests} request{'' if s.requests == 1 else 's'}"
        table = Table(title=f"one {s.phase} step: {s.tokens} tokens, {reqs}, "
                            f"{s.context_tokens} cached")
        for col in ("op", "layers", "shape (per GPU)", "time", "share"):
            table.add_column(col)
        for o in s.ops:
            table.add_row(o.op, str(o.count), o.shape,
                          fmt_seconds(o.seconds) + (" *" if o.extrapolated else ""),
                          f"{o.seconds / s.step_s:.0%}")
        if any(o.extrapolated for o in s.ops):
            table.caption = ("* past the measured range: the roofline from the nearest "
                             "measured edge (docs/silicon.md)")
        rest = s.step_s - s.kernels_s
        table.add_row("overheads + rest", "", "step, per-request, layer gaps, elementwise",
                      fmt_seconds(rest), f"{rest / s.step_s:.0%}")
        out.append(table)
    return out
