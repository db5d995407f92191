"""Typed results of the step-cost model: FLOPs, bytes and seconds of one step or a phase."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal, TypeVar

R = TypeVar("R")

Bound = Literal["compute", "memory"]

@dataclass(frozen=True, slots=True, kw_only=True)
class Flops:
    """FLOPs by component (one GPU)."""

    dense_gemm: float
    attention: float
    lm_head: float
    state: float

    @property
    def total(self) -> float:
        return self.dense_gemm + self.attention + self.lm_head + self.state


@dataclass(frozen=True, slots=True, kw_only=True)
class BytesMoved:
    """HBM bytes by component (one GPU)."""

    weights: int
    kv_read: int
    kv_write: int
    state: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_read + self.kv_write + self.state + self.activations


@dataclass(frozen=True, slots=True, kw_only=True)
class Seconds:
    """Time by component; ``total_s`` = roofline + communication + pipeline + overhead.

    ``compute_s`` and ``memory_s`` are the two sides summed over both kernel families;
    ``roofline_s`` is what the families cost, each bounded by its slower side.
    """

    compute_s: float
    memory_s: float
    roofline_s: float
    communication_s: float
    pipeline_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return self.roofline_s + self.communication_s + self.pipeline_s + self.overhead_s


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCost:
    """The cost of one step, or the sum over ``steps`` steps of a phase."""

    steps: int
    tokens: int
    flops: Flops
    bytes: BytesMoved
    seconds: Seconds
    ridge_point: float
    """Achievable FLOP/s over achievable bytes/s: intensity above it is compute-bound."""

    @property
    def bound(self) -> Bound:
        return "compute" if self.seconds.compute_s >= self.seconds.memory_s else "memory"

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops.total / self.bytes.total if self.bytes.total else 0.0


@dataclass(frozen=True, slots=True)
class StepAggregates:
    """The integer sums a step's cost depends on: Python ints for one step, arrays for a run
    (or for any list of recorded steps: ``StepCostModel.times_s`` prices them at once)."""

    tokens: Any
    requests: Any
    full_context: Any
    full_pairs: Any
    sliding_context: Any
    sliding_pairs: Any
    prefill: Any
    """1 where the step holds prefill work (see ``has_prefill``), else 0."""
    prefill_pairs: Any = 0
    """MLA: attended pairs of the requests computing more than one token (vLLM's prefill
    path); 0 for other models."""
    prefill_context: Any = 0
    """MLA: cached context tokens of those requests (up-projected by kv_b_proj)."""
    prefill_longest: Any = 0
    """The most new tokens one request computes in the step, where more than one (0 if
    none): Gated DeltaNet's chunked scan runs along each sequence."""


def at_most(mine: R, ref: R | None) -> R:
    """``mine`` (a frozen dataclass of non-negative rates, or None) with each float field at
    most ``ref``'s: a GPU whose measured cells were capped at the same die's (H200 at H100,
    GB200 at B200) keeps that rule through the lines fitted to them (least squares on each
    GPU alone put H200's decode-attention floor above H100's: Phi-3-mini's sliding layers,
    one decode over 100 tokens, 0.363 against 0.325 ms)."""
    if mine is None or ref is None:
        return mine
    theirs: Any = ref
    lower = {f.name: min(getattr(mine, f.name), getattr(theirs, f.name))
             for f in fields(mine)  # type: ignore[arg-type]
             if isinstance(getattr(mine, f.name), float)}
    out: R = replace(mine, **lower)  # type: ignore[type-var]
    return out
