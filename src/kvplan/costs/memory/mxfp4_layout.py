"""The padding vLLM's mxfp4 MoE kernels add to gpt-oss's expert weights, by GPU architecture.

vLLM 0.11 stores gpt-oss's routed experts (w13 = gate+up, w2 = down) not in the checkpoint's
shapes but in the layout of the MoE backend it picks for the GPU
(``quantization/mxfp4.py`` ``get_mxfp4_backend`` and ``Mxfp4MoEMethod.create_weights``;
``utils/mxfp4_utils.py`` ``_swizzle_mxfp4``)::

    backend                     GPUs              intermediate I/tp   hidden H   swizzle
    Triton (triton_kernels)     Hopper (sm90)     round up to 64      as is      contraction
                                                                                 axis to 512
                                                                                 values
    FlashInfer (bf16 / mxfp8)   Blackwell (sm100) round up to 256     to 256     -
    Marlin (weight-only fp4)    Ampere, Ada       round up to 128     to 256     -
    Triton                      ROCm (CDNA 3)     round up to 128     to 128     -

On Hopper the Triton layout (``HopperMXValueLayout``) pads the packed contraction axis of each
matrix to 256 bytes = 512 fp4 values: w13 multiplies along H, w2 along I. gpt-oss has
H = I = 2880, so every expert matrix grows 3072 / 2880 = 1.0667x at TP1. Checked against vLLM
0.11.0's "Model loading took 13.47 GiB" for gpt-oss-20b on H100 (llm-d/llm-d-benchmark
``config_explorer/empirical-vllm-memory-results.md``): 12.83 GiB of checkpoint shapes + 0.63 GiB
of padding = 13.46 GiB (+ the 32 MiB float32 rope cache: 13.48). gpt-oss-120b on H100: 60.78 +
3.78 = 64.56 GiB (vLLM 0.14.1 logs 64.38, vllm#33155; on the Marlin path vLLM 0.10.1 logged
65.97, vllm#23278, and this table's Marlin row gives 65.91, 65.93 with the rope cache).

Each expert also holds bf16 biases of 2I' (w13) and H' (w2) values, and one e8m0 scale per 32
values along the contraction axis. Only the extra bytes are computed here; the checkpoint's
own bytes stay in ``kvplan.costs.memory.params``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.costs.memory.params import pp_layer_ranges
from kvplan.costs.memory.weight_formats import FormatArg, given_format
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv

MX_BLOCK = 32
"""Values sharing one e8m0 scale."""
HOPPER_SWIZZLE_VALUES = 512
"""HopperMXValueLayout pads the packed contraction axis to 256 bytes (512 fp4 values)."""


@dataclass(frozen=True, slots=True)
class Mxfp4Backend:
    """How one vLLM mxfp4 MoE backend pads the expert shapes."""

    name: str
    inter_align: int
    hidden_align: int
    contraction_align: int = 1


_BACKENDS = {
    "hopper": Mxfp4Backend("triton (Hopper swizzle)", 64, 1, HOPPER_SWIZZLE_VALUES),
    "blackwell": Mxfp4Backend("flashinfer", 256, 256),
    "marlin": Mxfp4Backend("marlin", 128, 256),
    "rocm": Mxfp4Backend("triton (ROCm)", 128, 128),
}


def round_up(x: int, align: int) -> int:
    return cdiv(x, align) * align


def mxfp4_backend(hw: HardwareSpec, choice: str = "auto") -> Mxfp4Backend | None:
    """The backend vLLM 0.11 picks for this GPU; None where kvplan does not know the arch.
    ``choice`` 'marlin' (``VLLM_MXFP4_USE_MARLIN=1``) puts Hopper on Marlin: vLLM 0.11's
    ``get_mxfp4_backend`` checks it before Triton; Blackwell's FlashInfer comes first."""
    arch = hw.arch.lower()
    if arch.startswith("hopper"):
        return _BACKENDS["marlin" if choice == "marlin" else "hopper"]
    if arch.startswith("blackwell"):
        return _BACKENDS["blackwell"]
    if arch.startswith(("ampere", "ada")):
        return _BACKENDS["marlin"]
    if arch.startswith("cdna"):
        return _BACKENDS["rocm"]
    return None


def _expert_bytes(inter: int, hidden: int, b: Mxfp4Backend | None) -> int:
    """One expert's w13 + w2 (fp4 values, e8m0 scales, bf16 biases) in ``b``'s layout."""
    i = inter if b is None else round_up(inter, b.inter_align)
    h = hidden if b is None else round_up(hidden, b.hidden_align)
    k13, k2 = h, i  # contraction axes: w13 multiplies along H, w2 along I
    if b is not None:
        k13, k2 = round_up(k13, b.contraction_align), round_up(k2, b.contraction_align)
    w13 = 2 * i * (k13 // 2 + cdiv(k13, MX_BLOCK)) + 2 * i * 2
    w2 = h * (k2 // 2 + cdiv(k2, MX_BLOCK)) + h * 2
    return w13 + w2


def mxfp4_padding_bytes(model: ModelSpec, hw: HardwareSpec, *, quantization: str | None,
                        tp: int, pp: int, stage: int | None = None,
                        fmt: FormatArg = ..., backend: str = "auto") -> int:
    """Bytes vLLM's mxfp4 MoE layout adds on the fullest GPU, or on pipeline stage ``stage``
    (0 unless mxfp4 experts); ``fmt``: the resolved weight format (``...``: resolved here);
    ``backend``: --mxfp4-moe-backend."""
    fmt = given_format(fmt, quantization, model.quantization, model.weight_block_size,
                       model.quant_layout)
    moe = model.moe
    if fmt is None or fmt.name != "mxfp4" or moe is None:
        return 0
    layout = mxfp4_backend(hw, backend)
    if layout is None:
        return 0
    inter = cdiv(moe.moe_intermediate_size, tp)
    extra = (_expert_bytes(inter, model.hidden_size, layout)
             - _expert_bytes(inter, model.hidden_size, None))
    ranges = pp_layer_ranges(model.num_layers, pp)
    layers = max(len(r) for r in ranges) if stage is None else len(ranges[stage])
    return layers * moe.num_experts * extra
