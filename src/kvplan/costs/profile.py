"""Efficiency profile: the factors that turn datasheet peaks into achievable rates."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """Efficiency factors that turn datasheet peaks into achievable rates, for one GPU+precision.

    Defaults are physical, not fitted: dense GEMMs reach ~60% of the tensor peak in serving,
    HBM streaming ~80% of the datasheet bandwidth, NCCL/custom all-reduce ~70% of one link
    direction. Fixed costs are split by what a step holds: every step pays ``step_overhead_s``
    (~0.7 ms: scheduling, input preparation, one CUDA-graph replay, sampling); a step with
    prefill work (``has_prefill``) also pays ``prefill_overhead_s`` (~4 ms: eager/piecewise
    launches of variable-length kernels, attention metadata, first-token sampling setup).
    """

    gpu: str = "*"
    precision: str = "*"
    compute_eff: float = 0.6
    bandwidth_eff: float = 0.8
    comm_eff: float = 0.7
    step_overhead_s: float = 0.7e-3
    prefill_overhead_s: float = 4e-3
    allreduce_latency_s: float = 10e-6

    def __post_init__(self) -> None:
        for name in ("compute_eff", "bandwidth_eff", "comm_eff"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InputError(f"profile {name} must be in (0, 1], got {value}")
        for name in ("step_overhead_s", "prefill_overhead_s", "allreduce_latency_s"):
            if not getattr(self, name) >= 0:  # NaN fails too
                raise InputError(f"profile {name} must be >= 0, got {getattr(self, name)}")
