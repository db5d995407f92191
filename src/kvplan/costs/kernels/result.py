"""What a lookup answers: seconds per element, how each was obtained, which table it stands on."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
StatusArray = npt.NDArray[np.int8]


class Status(IntEnum):
    """How one answer was obtained; a larger value is a weaker claim."""

    MEASURED = 0
    """On a measured grid node."""
    INTERPOLATED = 1
    """Between measured nodes (log-latency, log-size, piecewise linear)."""
    EXTRAPOLATED = 2
    """Past the measured range (roofline scaling from the nearest edge) or on a node no row
    measured (filled the same way when the bundle was derived)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSource:
    """The measured table an answer stands on."""

    gpu: str
    """kvplan catalog id of the GPU the table was measured on."""
    family: str
    """gemm, attn_ctx, attn_gen, mla_ctx, mla_gen, moe, allreduce or nccl."""
    engine: str
    """vllm, sglang, trtllm (fallbacks where vLLM has no table) or nccl."""
    version: str
    kernels: tuple[str, ...]
    """Kernel sources measured for the slice; several: the fastest at each point."""
    file: str
    """The parquet file inside aiconfigurator-core the table was derived from."""

    @property
    def label(self) -> str:
        """'H100-SXM-80GB gemm, vllm 0.24.0' — what an answer cites."""
        return f"{self.gpu} {self.family}, {self.engine} {self.version}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpTime:
    """Seconds for each requested shape, each element's Status, and the table used."""

    seconds: FloatArray
    status: StatusArray
    source: TableSource
    notes: tuple[str, ...] = ()
    """Anything assumed beyond the table: heads / head size / window / shape scaled, a dtype
    priced on another dtype's table, a GPU count scaled."""

    @property
    def scaled(self) -> bool:
        """True when the shape itself was not in the table (see ``notes``)."""
        return bool(self.notes)

    @property
    def worst(self) -> Status:
        """The weakest status over all elements."""
        return Status(int(self.status.max())) if self.status.size else Status.MEASURED

    def describe(self) -> str:
        """One line: worst status, table, notes."""
        extra = "; ".join(self.notes)
        return f"{self.worst.name.lower()} ({self.source.label})" + (f"; {extra}" if extra else "")
