"""Collectives by (message bytes, GPUs): vLLM's custom all-reduce and NCCL's collectives,
over the link the GPU's tables were measured on (NVLink; PCIe on L40S)."""

from __future__ import annotations

from functools import cache, lru_cache

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels.grid import lookup
from kvplan.costs.kernels.result import FloatArray, OpTime, Status
from kvplan.costs.kernels.tables import Table, capped_at, require
from kvplan.errors import UnknownNameError

NCCL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")


def all_reduce(gpu: str, message_bytes: npt.ArrayLike, num_gpus: int, *,
               graph: bool = True) -> OpTime:
    """Seconds of one tensor-parallel all-reduce of a ``message_bytes`` bf16 tensor (tokens x
    hidden x 2) over ``num_gpus`` GPUs, as vLLM runs it (its custom all-reduce, NCCL for what
    that does not take): ``graph`` under CUDA graphs (decode), else eager."""
    table = require(gpu, "allreduce")
    key = ("mode", table.code("mode", "graph" if graph else "eager"))
    return _collective(gpu, table, key, message_bytes, num_gpus)


def nccl(gpu: str, op: str, message_bytes: npt.ArrayLike, num_gpus: int) -> OpTime:
    """Seconds of one NCCL collective (``NCCL_OPS``) of ``message_bytes`` fp16 bytes."""
    if op not in NCCL_OPS:
        raise UnknownNameError(f"unknown collective {op!r}: choose one of {', '.join(NCCL_OPS)}")
    table = require(gpu, "nccl")
    return _collective(gpu, table, ("op", table.code("op", op)), message_bytes, num_gpus)


def all_gather(gpu: str, message_bytes: npt.ArrayLike, num_gpus: int) -> OpTime:
    """NCCL all-gather; ``message_bytes`` is the gathered (output) tensor's size."""
    return nccl(gpu, "all_gather", message_bytes, num_gpus)


def logits_gather_s(gpu: str, rows: npt.ArrayLike, n: int, tp: int) -> FloatArray:
    """vLLM's LogitsProcessor._gather_logits under TP: an all-gather of each rank's
    [rows, n] 16-bit logits (n: the padded vocab / tp) into [rows, n x tp], only the
    sampled rows (one per request); 0 at TP1."""
    size = np.asarray(rows, dtype=np.int64) * n * tp * 2
    if tp <= 1:
        return np.zeros(size.shape, dtype=np.float64)
    return all_gather(gpu, size, tp).seconds


def all_reduce_s(gpu: str, message_bytes: npt.ArrayLike, num_gpus: int, *,
                 graph: bool = True) -> FloatArray:
    """``all_reduce(...).seconds``."""
    return all_reduce(gpu, message_bytes, num_gpus, graph=graph).seconds


@lru_cache(maxsize=64)
def all_reduce_line(gpu: str, bytes_per_token: int, tp: int, top: int,
                    graph: bool = True) -> FloatArray:
    """One all-reduce of m = 1..top tokens' activations (index m - 1; a step's line): as a
    CUDA graph replays it (``graph``), or eagerly, as vLLM runs a step longer than its
    largest captured graph (the custom all-reduce then copies its input into the shared
    buffer: H100 TP8, 8,192 tokens of Llama-3.1-70B: 664.6 us eager, 577.4 us in a graph),
    never faster than the graph (L40S TP8's eager rows dip 2% under it at 1,024 tokens: a
    step would get cheaper past the largest graph). Cached: not to be written."""
    size = np.arange(1, top + 1, dtype=np.int64) * bytes_per_token
    line = all_reduce_s(gpu, size, tp)
    if not graph:
        line = np.maximum(line, all_reduce_s(gpu, size, tp, graph=False))
    line.setflags(write=False)
    return line


@cache
def link_scale(gpu: str) -> float:
    """How many times slower ``gpu``'s scale-up link is than that of the GPU whose tables
    price it: 1 for a measured GPU; a ``kernels_of`` twin's collectives are read at this many
    times their bytes (H800: 900 / 400 GB/s NVLink = 2.25), which is the twin's time where
    the link's bandwidth binds and leaves the latency-bound small messages as measured."""
    from kvplan.specs.hardware import load_gpu

    try:
        spec = load_gpu(gpu)
    except UnknownNameError:
        return 1.0
    if not spec.kernels_of or spec.interconnect_bytes_per_s <= 0:
        return 1.0
    twin = load_gpu(spec.kernels_of).interconnect_bytes_per_s
    return max(1.0, twin / spec.interconnect_bytes_per_s)


def _collective(gpu: str, table: Table, key: tuple[str, int], message_bytes: npt.ArrayLike,
                num_gpus: int) -> OpTime:
    size = np.asarray(message_bytes, dtype=np.float64)
    scale = link_scale(gpu) if table.gpu.lower() != gpu.lower() else 1.0
    link_notes: tuple[str, ...] = ()
    if scale != 1.0:
        size = size * scale
        link_notes = (f"{gpu}: {table.gpu}'s measured collectives at {scale:.3g}x the bytes "
                      "(its scale-up link is that much slower)",)
    if num_gpus <= 1:
        return OpTime(seconds=np.zeros(size.shape), status=np.zeros(size.shape, dtype=np.int8),
                      source=table.source(), notes=("one GPU: no collective",))
    rows = np.flatnonzero(table.column(key[0]) == key[1])
    counts = table.column("num_gpus")[rows]
    below = counts[counts <= num_gpus]
    ref = int(below.max() if below.size else counts.min())
    row = int(rows[counts == ref][0])
    seconds, status = lookup(table, row, (size,))
    notes: tuple[str, ...] = ()
    if ref != num_gpus:
        # a ring moves 2(g-1)/g of the message per GPU: scale by that from the nearest count
        factor = ((num_gpus - 1) / num_gpus) / ((ref - 1) / ref)
        seconds = seconds * factor
        status = np.maximum(status, Status.EXTRAPOLATED).astype(np.int8)
        notes = (f"{num_gpus} GPUs not measured: scaled x{factor:.3g} from {ref} "
                 "(ring traffic 2(g-1)/g)",)
        seconds, notes = _at_most_reference(table, key, size, num_gpus, seconds, notes)
    kernels = tuple(table.meta["kernels"]) if isinstance(table.meta["kernels"], list) else ()
    return OpTime(seconds=seconds, status=status, source=table.source(kernels),
                  notes=link_notes + notes)


def _at_most_reference(table: Table, key: tuple[str, int], size: FloatArray, num_gpus: int,
                       seconds: FloatArray, notes: tuple[str, ...]
                       ) -> tuple[FloatArray, tuple[str, ...]]:
    """A GPU count its own table lacks, on a GPU the bundle caps at a reference (GB200 at
    B200: the same die and NVLink 5; its tables stop at 4 GPUs): never slower than the
    reference's answer at that count, which the derive step could not cap cell by cell."""
    ref_gpu = capped_at(table.gpu)
    if ref_gpu is None:
        return seconds, notes
    theirs = _collective(ref_gpu, require(ref_gpu, table.family), key, size, num_gpus)
    if not np.any(theirs.seconds < seconds):
        return seconds, notes
    return np.minimum(seconds, theirs.seconds), (*notes, (
        f"capped at {ref_gpu}'s {num_gpus}-GPU time where that is faster (the same die and "
        "link: never slower)"))
