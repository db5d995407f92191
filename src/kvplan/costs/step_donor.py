"""Rates for GPUs without measured kernel tables: the achieved fractions of peak of the
nearest measured generation's kernels (never a fit on serving data)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from kvplan.specs.hardware import HardwareSpec

_DONORS = (("blackwell", "B200-SXM-180GB"), ("hopper", "H100-SXM-80GB"),
           ("ada", "L40S"), ("ampere", "A100-80GB-SXM"), ("cdna", "H100-SXM-80GB"),
           ("tpu", "H100-SXM-80GB"))
"""Architecture word -> the measured GPU whose kernels stand in. AMD CDNA 3 and TPU v5e are
of Hopper's generation (2023); their kernels are not NVIDIA's, which the answer says."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DonorRates:
    """Achieved fractions of datasheet peak, read off a measured GPU's tables."""

    donor: str
    compute_eff: float
    """A measured 8,192-cubed GEMM's FLOP/s over the donor's peak at that precision."""
    bandwidth_eff: float
    """The measured decode-attention kernel's bytes/s over the donor's HBM peak."""


def donor_for(hardware: HardwareSpec) -> str:
    """The measured GPU whose kernels stand in for ``hardware`` (by architecture)."""
    arch = f"{hardware.arch} {hardware.id}".lower()
    for word, donor in _DONORS:
        if word in arch:
            return donor
    return "H100-SXM-80GB"


@cache
def donor_rates(hardware_id: str, arch: str, precision: str) -> DonorRates:
    """The donor's achieved fractions of peak at ``precision`` (cached per GPU)."""
    from kvplan.costs import kernels as kn
    from kvplan.specs.hardware import load_gpu

    donor = donor_for(HardwareSpec(id=hardware_id, memory_bytes=1, mem_bw_bytes_per_s=1.0,
                                   arch=arch))
    spec = load_gpu(donor)
    dtype = precision if precision in ("fp8", "bfloat16", "float16") else "bfloat16"
    n = 8192
    gemm = float(kn.gemm_s(donor, np.array([n]), n, n, dtype)[0])
    compute = 2.0 * n ** 3 / gemm / spec.peak_flops_for(dtype)
    b, ln, kvh, d = 64, 8192, 8, 128
    t = float(kn.decode_attention_s(donor, b, ln, num_heads=32, num_kv_heads=kvh,
                                    head_dim=d)[()])
    bandwidth = b * ln * kvh * d * 4 / t / spec.mem_bw_bytes_per_s
    return DonorRates(donor=donor, compute_eff=round(min(compute, 1.0), 4),
                      bandwidth_eff=round(min(bandwidth, 1.0), 4))
