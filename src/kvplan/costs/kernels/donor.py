"""GPUs without tables (MI300X, L4, A10G, RTX, TPU ...): which measured GPU's efficiencies
they borrow (same architecture, nearest datasheet; else nearest datasheet), and those
efficiencies, read off the donor's measured tables."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from kvplan.costs.kernels.attention import decode_attention
from kvplan.costs.kernels.gemm import gemm, gemm_slice
from kvplan.costs.kernels.result import Status, TableSource
from kvplan.costs.kernels.tables import measured_gpus, peaks, require
from kvplan.costs.kernels.work import decode_attention_bytes, gemm_flops
from kvplan.specs.hardware import HardwareSpec, gpu_catalog, load_gpu

GEMM_SIZES = (4096, 8192, 16384)
"""Large bf16 GEMMs (every m, n, k combination): the compute efficiency's sample."""
DECODE_BATCHES, DECODE_KV = (8, 16, 32, 64), (16384, 32768, 65536)
"""Decode attention (32/8 heads, head 128, bf16 KV) moving >= 1 GiB: the bandwidth sample."""
_FAMILIES = ("Ampere", "Hopper", "Ada", "Blackwell")


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """Achieved over datasheet on a measured GPU's tables, for roofline pricing elsewhere."""

    gpu: str
    donor: str
    """kvplan id of the measured GPU the figures come from (``gpu`` itself when measured)."""
    reason: str
    compute: float
    """Median achieved / peak FLOP/s over large GEMMs (``GEMM_SIZES``) at the precision's
    measured family and rate (bf16 where the donor measures none)."""
    memory: float
    """Median achieved / peak bytes/s over decode attention moving >= 1 GiB."""
    sources: tuple[TableSource, TableSource]
    capped: tuple[str, ...] = ()
    """Which of 'compute' / 'memory' the GPU's own measured best rate (its ``achievable``
    block in gpus.json) lowered below the donor's efficiency."""


def nearest_measured_gpu(gpu: HardwareSpec | str, precision: str = "bfloat16") -> Efficiency:
    """The donor for ``gpu`` (an id, alias or HardwareSpec) and its efficiencies at the
    ``precision`` compute rate, each no higher than the best rate measured on ``gpu`` itself
    (AMD's max-achievable FLOP/s on MI300X are 54% of the datasheet, where H200's tables
    reach 76%: a roofline at the donor's efficiency would run above what the GPU can)."""
    spec = gpu if isinstance(gpu, HardwareSpec) else load_gpu(gpu)
    donor, reason = _donor(spec)
    compute, memory, sources = _efficiencies(donor, precision)
    own_compute = _own(spec.achievable.get(precision), spec.peak_flops_for(precision))
    own_memory = _own(spec.achievable.get("mem_bw"), spec.mem_bw_bytes_per_s)
    capped = tuple(name for name, own, eff in (("compute", own_compute, compute),
                                                ("memory", own_memory, memory)) if own < eff)
    return Efficiency(gpu=spec.id, donor=donor, reason=reason, compute=min(compute, own_compute),
                      memory=min(memory, own_memory), sources=sources, capped=capped)


def dominated_by(gpu: HardwareSpec, donor: str) -> bool:
    """Whether the measured GPU ``donor`` beats ``gpu`` on every datasheet figure a step
    reads - bf16 and fp8 FLOP/s, memory bandwidth, interconnect - within one architecture
    (H100-SXM over H100-PCIe, A100-80GB over A100-40GB, L40S over L4): then ``gpu`` is never
    priced faster than ``donor`` (costs/step/coefficients.py ``floored``)."""
    other = gpu_catalog()[donor.lower()]
    family = next((f for f in _FAMILIES if f.lower() in gpu.arch.lower()), None)
    if family is None or family.lower() not in other.arch.lower() or other.id == gpu.id:
        return False
    pairs = ((other.peak_flops_for("bfloat16"), gpu.peak_flops_for("bfloat16")),
             (other.peak_flops_for("fp8"), gpu.peak_flops_for("fp8")),
             (other.mem_bw_bytes_per_s, gpu.mem_bw_bytes_per_s),
             (other.interconnect_bytes_per_s, gpu.interconnect_bytes_per_s))
    return all(theirs >= mine for theirs, mine in pairs)


def dominating(gpu: HardwareSpec) -> tuple[str, ...]:
    """Every measured GPU that beats ``gpu`` on every datasheet figure (``dominated_by``),
    not only its donor: an H20-like Hopper (148 TFLOP/s, 4.0 TB/s) borrows H100's rates, the
    nearest datasheet, yet is never priced faster than H200 either."""
    return tuple(g for g in measured_gpus() if dominated_by(gpu, g))


def _own(measured: float | None, peak: float) -> float:
    """A measured best rate over the datasheet's (1.0 where none was measured)."""
    return measured / peak if measured and peak > 0 else 1.0


def _donor(spec: HardwareSpec) -> tuple[str, str]:
    measured = {g.lower(): g for g in measured_gpus()}
    if spec.id.lower() in measured:
        return measured[spec.id.lower()], "measured"
    family = next((f for f in _FAMILIES if f.lower() in spec.arch.lower()), None)
    same = [g for g in measured_gpus() if family and _family(g) == family]
    pool = same or list(measured_gpus())
    best = min(pool, key=lambda g: _distance(spec, g))
    why = (f"same architecture ({family}), nearest datasheet" if same
           else "no measured GPU of its architecture: nearest datasheet (bf16 FLOP/s, bytes/s)")
    return best, why


def _family(gpu: str) -> str | None:
    spec = gpu_catalog()[gpu.lower()]  # every bundled GPU is a catalog GPU (tests say so)
    return next((f for f in _FAMILIES if f.lower() in spec.arch.lower()), None)


def _distance(spec: HardwareSpec, gpu: str) -> float:
    figures = peaks(gpu)
    return (_log_gap(spec.peak_flops_for("bfloat16"), figures["bfloat16"])
            + _log_gap(spec.mem_bw_bytes_per_s, figures["mem_bw"]))


def _log_gap(own: float, measured: float) -> float:
    """|log(own / measured)|; 0 where the GPU gives no figure (a custom GPU file without a
    bf16 rate is compared on the other figure alone)."""
    return abs(math.log(own / measured)) if own > 0 and measured > 0 else 0.0


_TABLE_RATE = {"fp8": "fp8", "nvfp4": "fp4"}
"""A measured GEMM family's datasheet tensor rate (anything else: bfloat16)."""


@cache
def _efficiencies(gpu: str, precision: str = "bfloat16"
                  ) -> tuple[float, float, tuple[TableSource, TableSource]]:
    """The measured ``gpu``'s compute efficiency at ``precision`` - its GEMMs of the family
    that prices it (fp8 and int8: the per-tensor fp8 table where measured; fp4: nvfp4) over
    that family's datasheet rate; bf16's where it measures none (H100: fp8 0.59, bf16 0.75)
    - and its memory efficiency."""
    m, n, k = np.meshgrid(GEMM_SIZES, GEMM_SIZES, GEMM_SIZES, indexing="ij")
    word = "bfloat16"
    if precision in ("fp8", "int8", "fp4"):
        word = gemm_slice(require(gpu, "gemm"), precision)[0]
    answer = gemm(gpu, m.ravel(), n.ravel(), k.ravel(), word)
    rate = gemm_flops(m.ravel(), n.ravel(), k.ravel()) / answer.seconds
    compute = float(np.median(rate)) / peaks(gpu)[_TABLE_RATE.get(word, "bfloat16")]
    b, t = np.meshgrid(DECODE_BATCHES, DECODE_KV, indexing="ij")
    moved = decode_attention_bytes(b.ravel(), t.ravel(), 8, 128, "bfloat16")
    decode = decode_attention(gpu, b.ravel(), t.ravel(), num_heads=32, num_kv_heads=8,
                              head_dim=128)
    keep = (moved >= 2**30) & (decode.status == Status.MEASURED)
    memory = float(np.median(moved[keep] / decode.seconds[keep])) / peaks(gpu)["mem_bw"]
    return compute, memory, (answer.source, decode.source)


def rates_donor(gpu: HardwareSpec) -> str:
    """The measured GPU whose kernels' efficiencies price ``gpu``'s roofline (``gpu`` itself
    where it is measured): what `kvplan gpus` names for a GPU without tables."""
    return _donor(gpu)[0]
