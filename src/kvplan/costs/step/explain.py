"""Where a step's milliseconds go: one prefill step and one decode step of a static batch,
op by op from the measured kernel tables, and which tables (GPU, engine, version) the answer
stands on (``kvplan latency --explain``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.tables import OpTime, op_times


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOps:
    """One step's kernels, op by op, plus what the kernels do not cover."""

    phase: str
    tokens: int
    requests: int
    context_tokens: int
    ops: tuple[OpTime, ...]
    step_s: float
    """The whole step as the model prices it (kernels + all-reduces + overheads)."""

    @property
    def kernels_s(self) -> float:
        return sum(o.seconds for o in self.ops)


def kernel_basis(timer: StepCostModel) -> str:
    """One line: the measured tables (or the roofline and its donor) the answer stands on."""
    ms = timer.measured
    if ms is not None:
        from kvplan.costs import kernels as kn

        src = kn.gemm(ms.gpu, 1, 4096, 4096, timer.gemm_dtype).source
        line = (f"kernels measured on {ms.gpu} ({src.engine} {src.version}; "
                "aiconfigurator-core tables, Apache-2.0)")
        mla = timer.ops is not None and any(a.kind == "mla" for a in timer.ops.attention)
        if mla and (donor := kn.mla_donor(ms.gpu)) is not None:
            line += (f"; no MLA table on {ms.gpu}: its MLA blocks are {donor}'s x the two "
                     "GPUs' measured attention ratio")
        return line
    if timer.donor is not None:
        return (f"roofline: {timer.hardware.id} has no measured kernel tables; rates of "
                f"{timer.donor}'s measured kernels (compute {timer.profile.compute_eff:.0%}, "
                f"bandwidth {timer.profile.bandwidth_eff:.0%} of peak)")
    return "roofline under the profile's efficiencies"


def explain_steps(timer: StepCostModel, batch: int, prompt: int,
                  chunk: int | None) -> tuple[StepOps, ...]:
    """The first prefill step and the first decode step of ``batch`` requests of ``prompt``
    tokens (prefill chunked at ``chunk`` tokens; None: one step), op by op."""
    import numpy as np

    if timer.measured is None or timer.ops is None:
        return ()
    total = batch * prompt
    first = min(total, chunk or total)
    full, rest = divmod(first, prompt)
    new = [prompt] * full + ([rest] if rest else [])
    pre = _step(timer, "prefill", np.array(new), np.zeros(len(new), dtype=np.int64))
    dec = _step(timer, "decode", np.ones(batch, dtype=np.int64),
                np.full(batch, prompt, dtype=np.int64))
    return pre, dec


def _step(timer: StepCostModel, phase: str, new: object, ctx: object) -> StepOps:
    import numpy as np

    n, c = np.asarray(new, dtype=np.int64), np.asarray(ctx, dtype=np.int64)
    pairs = int(np.dot(n, c)) + int(np.dot(n, n + 1)) // 2
    step_s = timer.step_time_s(n, c)  # first: grows the token tables to this step's size
    assert timer.measured is not None and timer.ops is not None
    ops = op_times(timer.ops, timer.measured, timer.gemm_dtype,
                   tokens=int(n.sum()), requests=len(n), context=int(c.sum()), pairs=pairs)
    return StepOps(phase=phase, tokens=int(n.sum()), requests=len(n),
                   context_tokens=int(c.sum()), ops=ops, step_s=step_s)
