"""MoE grouped-GEMM latency (gate, up and down projections of the routed experts) by tokens,
model shape, dtype and tensor/expert parallelism: vLLM's fused-MoE kernels, balanced routing."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from kvplan.costs.kernels import moe_weight_only as wo
from kvplan.costs.kernels.grid import lookup
from kvplan.costs.kernels.result import FloatArray, OpTime
from kvplan.costs.kernels.tables import Table, peaks, require, resolve_gpu
from kvplan.costs.kernels.work import (
    BYTES_PER_ELEMENT,
    TENSOR_RATE,
    moe_bytes,
    moe_flops,
    roofline_s,
)
from kvplan.errors import UnknownNameError

MOE_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4", "w4a16_mxfp4", "w4a16_mxfp4_marlin",
              "int4_wo", "int8")
MARLIN = "w4a16_mxfp4_marlin"
"""vLLM's Marlin MXFP4 MoE (weights dequantised to bf16 in registers, Ampere-style mma): what
vLLM before 0.12 ran on Hopper unless ``triton_kernels`` was installed by hand (vLLM PRs
#27370, #28788 made it a dependency). Measured on H100, H200, B200 and GB200 (vLLM 0.24,
Kimi-K3's shape); elsewhere the GPU's own w4a16 MXFP4 kernel prices it."""
_ALIASES = {"bf16": "bfloat16", "float16": "bfloat16", "fp16": "bfloat16", "mxfp4":
            "w4a16_mxfp4", "fp4": "nvfp4"}
_KEYS = ("hidden", "inter", "topk", "experts", "tp", "ep")


@dataclass(frozen=True, slots=True)
class MoeShape:
    """One MoE layer as one GPU runs it."""

    hidden: int
    inter: int
    """Per-expert intermediate size before tensor parallelism."""
    topk: int
    experts: int
    tp: int
    ep: int

    def weight_bytes(self, width: float) -> float:
        """The local experts' gate, up and down weights."""
        return self.experts / self.ep * 3.0 * self.hidden * self.inter / self.tp * width

    def flops_per_token(self) -> float:
        """Per routed token on this GPU (topk/ep of the experts are local on average)."""
        return 6.0 * self.hidden * self.inter / self.tp * self.topk / self.ep


def moe(gpu: str, tokens: npt.ArrayLike, *, hidden: int, inter: int, num_experts: int,
        topk: int, dtype: str = "bfloat16", tp: int = 1, ep: int = 1) -> OpTime:
    """Seconds of one MoE layer's expert GEMMs for ``tokens`` tokens (before routing),
    ``inter`` split over ``tp``, experts over ``ep``. A shape the table lacks is read off the
    nearest measured one: time scaled by the local weight bytes, tokens by the per-token
    FLOPs over weight bytes — both regimes (weight-bound, compute-bound) then scale right.

    Per-tensor fp8 is capped at the same GPU's block-scaled fp8 and bf16 MoE where those are
    faster: per-tensor scales do no more work than block scales (vLLM's Triton fused-MoE runs
    both), and fp8 on fp8 tensor cores reads half the bytes at twice the rate of bf16. The
    measured per-tensor rows (ModelOpt's FlashInfer CUTLASS path) are 1.2-3.7x slower than
    bf16 on H100 / H200 at every catalog MoE shape."""
    shape = {"hidden": hidden, "inter": inter, "num_experts": num_experts, "topk": topk,
             "tp": tp, "ep": ep}
    got, word = _moe(gpu, tokens, dtype, **shape)
    if word != "fp8":
        return got
    block, _ = _moe(gpu, tokens, "fp8_block", **shape)
    bf16, _ = _moe(gpu, tokens, "bfloat16", **shape)
    capped = np.minimum(got.seconds, np.minimum(block.seconds, bf16.seconds))
    if not np.any(capped < got.seconds):
        return got
    note = (f"per-tensor fp8 MoE capped at {resolve_gpu(gpu)}'s block-scaled fp8 / bf16 MoE "
            "where faster (the measured per-tensor kernel is slower at this shape)")
    return OpTime(seconds=capped, status=got.status, source=got.source, notes=(*got.notes, note))


def _moe(gpu: str, tokens: npt.ArrayLike, dtype: str, *, hidden: int, inter: int,
         num_experts: int, topk: int, tp: int, ep: int) -> tuple[OpTime, str]:
    """(the table's time, the dtype word it was read at) of ``moe``'s arguments."""
    table = require(gpu, "moe")
    wanted = _ALIASES.get(dtype.lower(), dtype.lower())
    if wanted == MARLIN and not has_dtype(gpu, MARLIN):
        got, word = _moe(gpu, tokens, "w4a16_mxfp4", hidden=hidden, inter=inter,
                         num_experts=num_experts, topk=topk, tp=tp, ep=ep)
        note = f"Marlin MXFP4 MoE not measured on {table.gpu}: its default w4a16 kernel"
        return replace(got, notes=(*got.notes, note)), word
    if wanted == "nvfp4" and not _measured(table, wanted) and not peaks(table.gpu).get("fp4"):
        got, word = _moe(gpu, tokens, "int4_wo", hidden=hidden, inter=inter,
                         num_experts=num_experts, topk=topk, tp=tp, ep=ep)
        note = (f"{table.gpu} has no fp4 tensor cores: nvfp4 experts run vLLM's Marlin MoE, "
                "priced on its measured 4-bit Marlin MoE (int4_wo)")
        return replace(got, notes=(*got.notes, note)), word
    if (how := _derived(table, wanted)) is not None:
        return _by_roofline(gpu, tokens, how, wanted, hidden=hidden, inter=inter,
                            num_experts=num_experts, topk=topk, tp=tp, ep=ep), "bfloat16"
    word, notes = _dtype(table, dtype)
    if word != wanted and wanted in wo.WEIGHT_ONLY and resolve_gpu(gpu) != wo.DONOR:
        return _weight_only(gpu, tokens, wanted, hidden=hidden, inter=inter,
                            num_experts=num_experts, topk=topk, tp=tp, ep=ep), wanted
    want = MoeShape(hidden, inter, topk, num_experts, tp, ep)
    row, ref = _nearest(table, word, want)
    count = np.asarray(tokens, dtype=np.float64)
    if ref == want:
        seconds, status = lookup(table, row, (count,))
    else:
        width = BYTES_PER_ELEMENT[word]
        time_scale = want.weight_bytes(width) / ref.weight_bytes(width)
        token_scale = (want.flops_per_token() / ref.flops_per_token()) / time_scale
        seconds, status = lookup(table, row, (count * token_scale,))
        seconds = np.maximum(seconds * time_scale, _floor(table.gpu, count, want, word))
        notes += (f"MoE shape {_text(want)} not measured: scaled from {_text(ref)} "
                  f"(time x{time_scale:.3g}, tokens x{token_scale:.3g})",)
    kernels = tuple(table.meta["kernels"].get(word, ()))
    return OpTime(seconds=seconds, status=status, source=table.source(kernels), notes=notes), word


def _derived(table: Table, wanted: str) -> tuple[float, float, str] | None:
    """(weight bytes, int8-or-16-bit rate over bf16's, what) of an 8-bit MoE kernel vLLM runs
    where the GPU measures none: fp8 experts without fp8 tensor cores run fp8 Marlin MoE
    (16-bit math), int8 W8A8 experts without a same-rate fp8 table the Triton int8 MoE."""
    from kvplan.costs.kernels.gemm import int8_rate

    figures = peaks(table.gpu)
    if wanted in ("fp8", "fp8_block") and not figures.get("fp8"):
        return 1.0, 1.0, f"{table.gpu} has no fp8 tensor cores: fp8 experts run Marlin MoE"
    if wanted == "int8" and _dtype(table, "int8")[0] == "bfloat16":
        return 1.0, int8_rate(table.gpu) / float(figures["bfloat16"]), "int8 W8A8 experts"
    return None


def _by_roofline(gpu: str, tokens: npt.ArrayLike, how: tuple[float, float, str], dtype: str,
                 **shape: int) -> OpTime:
    """The bf16 MoE times the datasheet roofline ratio of the derived kernel
    (``moe_weight_only.roofline_ratio``), never under its own datasheet floor (the ratio
    counts fewer activation bytes than the routed tokens move: ``work.moe_bytes``)."""
    width, rate, what = how
    base = moe(gpu, tokens, dtype="bfloat16", **shape)
    s = MoeShape(shape["hidden"], shape["inter"], shape["topk"], shape["num_experts"],
                 shape["tp"], shape["ep"])
    count = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
    ratio = wo.roofline_ratio(gpu, count, local_bytes=s.weight_bytes(2.0),
                              flops_per_token=s.flops_per_token(),
                              touched=np.minimum(1.0, count * s.topk / s.experts),
                              hidden=s.hidden, width=width, rate=rate)
    note = f"{what}: its bf16 MoE x the datasheet roofline ratio at {width:g} B a weight"
    t, figures = np.asarray(tokens, dtype=np.float64), peaks(gpu)
    floor = roofline_s(moe_flops(t, s.hidden, s.inter, s.topk, s.tp, s.ep),
                       moe_bytes(t, s.hidden, s.inter, s.topk, s.experts, s.tp, s.ep, dtype),
                       rate * float(figures["bfloat16"]), float(figures["mem_bw"]))
    return replace(base, seconds=np.maximum(base.seconds * ratio, floor),
                   notes=(*base.notes, note))


def _weight_only(gpu: str, tokens: npt.ArrayLike, word: str, **shape: int) -> OpTime:
    """A w4a16 MoE on a GPU without its table (``kvplan.costs.kernels.moe_weight_only``)."""
    count = np.asarray(tokens, dtype=np.float64)
    at = count * wo.token_scale(gpu)
    return wo.priced_by_ratio(moe(gpu, count, dtype="bfloat16", **shape),
                              moe(wo.DONOR, at, dtype=word, **shape),
                              moe(wo.DONOR, at, dtype="bfloat16", **shape), word, gpu)


def has_dtype(gpu: str, dtype: str) -> bool:
    """Whether the GPU's MoE table measured this dtype word."""
    return _measured(require(gpu, "moe"), dtype)


def _measured(table: Table, word: str) -> bool:
    return table.code("dtype", word) in set(table.column("dtype").tolist())


def moe_s(gpu: str, tokens: npt.ArrayLike, *, hidden: int, inter: int, num_experts: int,
          topk: int, dtype: str = "bfloat16", tp: int = 1, ep: int = 1) -> FloatArray:
    """``moe(...).seconds``."""
    return moe(gpu, tokens, hidden=hidden, inter=inter, num_experts=num_experts, topk=topk,
               dtype=dtype, tp=tp, ep=ep).seconds


def served_moe_s(gpu: str, tokens: npt.ArrayLike, *, hidden: int, inter: int,
                 num_experts: int, topk: int, dtype: str = "bfloat16", tp: int = 1,
                 ep: int = 1) -> FloatArray:
    """``moe_s`` as a served step prices it: block-scaled fp8 experts never above the bf16
    experts of the same shape (half the weight bytes at the fp8 tensor-core rate; the bound
    ``moe`` puts on per-tensor fp8). B200's measured block-fp8 rows ran Qwen3-30B-A3B-FP8's
    4 x 4,096-token prefill step's experts in 100.9 ms against 64.9 ms bf16. ``moe`` itself
    keeps the measured block-fp8 rows (docs/silicon.md quotes them)."""
    shape = {"hidden": hidden, "inter": inter, "num_experts": num_experts, "topk": topk,
             "tp": tp, "ep": ep}
    t = moe_s(gpu, tokens, dtype=dtype, **shape)
    if _ALIASES.get(dtype.lower(), dtype.lower()) != "fp8_block":
        return t
    out: FloatArray = np.minimum(t, moe_s(gpu, tokens, dtype="bfloat16", **shape))
    return out


def moe_routing(gpu: str) -> str:
    """How the GPU's MoE rows routed tokens when measured: 'balanced' (aiconfigurator's
    ``balanced_logits``: T x k rows over min(E, T k) experts) or 'power_law_1.01' (A100's
    only rows)."""
    return str(require(gpu, "moe").meta.get("distribution", "balanced"))


def _floor(gpu: str, tokens: FloatArray, shape: MoeShape, dtype: str) -> FloatArray:
    figures = peaks(gpu)
    s = shape
    return roofline_s(moe_flops(tokens, s.hidden, s.inter, s.topk, s.tp, s.ep),
                      moe_bytes(tokens, s.hidden, s.inter, s.topk, s.experts, s.tp, s.ep, dtype),
                      figures[TENSOR_RATE[dtype]] or figures["bfloat16"], figures["mem_bw"])


def _dtype(table: Table, dtype: str) -> tuple[str, tuple[str, ...]]:
    want = _ALIASES.get(dtype.lower(), dtype.lower())
    if want not in MOE_DTYPES:
        raise UnknownNameError(f"unknown MoE dtype {dtype!r}: choose one of "
                               f"{', '.join(MOE_DTYPES)}")
    if _measured(table, want):
        return want, ()
    if want == "int8":  # vLLM's Triton fused-MoE runs int8 W8A8 as it runs fp8 W8A8
        from kvplan.costs.kernels.gemm import int8_rate

        same = _measured(table, "fp8") and int8_rate(table.gpu) == peaks(table.gpu).get("fp8")
        return ("fp8", ("int8 W8A8 experts priced on the fp8 MoE table (the same rate)",)
                ) if same else ("bfloat16", (f"int8 MoE not measured on {table.gpu}: priced "
                                             "as bfloat16",))
    rate = {"nvfp4": "fp4", "fp8": "fp8", "fp8_block": "fp8"}.get(want)
    why = (f"{table.gpu} has no {rate} tensor cores" if rate and not peaks(table.gpu).get(rate)
           else f"{want} MoE not measured on {table.gpu}")
    return "bfloat16", (f"{why}: priced as bfloat16",)


EP_WEIGHT = 2.0
"""Log-distance weight of a different EP degree. An EP slice runs its local experts but
permutes every token (vLLM's EP-local map): on H100's Marlin rows an EP-32 slice reaches 86
TFLOP/s where EP 1 reaches 230 at the same tokens per expert, so a slice of another EP
degree is a different kernel's work, not the same work on fewer experts."""


def _nearest(table: Table, word: str, want: MoeShape) -> tuple[int, MoeShape]:
    """The measured slice of this dtype closest in the local shape (log distance; a slice of
    the same EP degree first)."""
    rows = np.flatnonzero(table.column("dtype") == table.code("dtype", word))
    cols = {k: table.column(k)[rows].astype(np.float64) for k in _KEYS}
    cost = (np.abs(np.log(cols["hidden"] / want.hidden))
            + np.abs(np.log(cols["inter"] / cols["tp"] / (want.inter / want.tp)))
            + np.abs(np.log(cols["experts"] / cols["ep"] / (want.experts / want.ep)))
            + np.abs(np.log(cols["topk"] / want.topk))
            + 0.01 * np.abs(np.log(cols["tp"] / want.tp))
            + EP_WEIGHT * np.abs(np.log(cols["ep"] / want.ep)))
    best = int(np.argmin(cost))
    ref = MoeShape(*(int(cols[k][best]) for k in _KEYS))
    return int(rows[best]), ref


def _text(shape: MoeShape) -> str:
    return (f"(hidden {shape.hidden}, inter {shape.inter}, top-{shape.topk} of "
            f"{shape.experts}, tp {shape.tp}, ep {shape.ep})")
