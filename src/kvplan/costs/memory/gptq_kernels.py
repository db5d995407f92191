"""What vLLM 0.11's GPTQ linear kernels keep on the GPU beyond the values and scales.

A GPTQ checkpoint's linear layer loads ``qweight`` (int32, bits x K x N), ``scales`` (K/g x N,
16-bit), ``qzeros`` (int32, K/g x N x bits / 32) and ``g_idx`` (int32, one per input row K).
``process_weights_after_loading`` of the kernel vLLM picks decides which of the last two stay
allocated ("Model loading took" counts what is left)::

    kernel    picked for                               qzeros   g_idx        act order adds
    machete   GPTQMarlinLinearMethod on Hopper (sm90)  kept     kept (4 K)   perm (4 K)
    marlin    gptq_marlin elsewhere (and on Hopper     freed    freed        g_idx + sort
              where Machete cannot: act order with                           indices (8 K)
              K split over TP, K % 64, N % 128)
    exllama   GPTQConfig: bits 2 / 3, sym false, or    kept     freed        g_idx (4 K)
              ``--quantization gptq`` forcing it

(``kernels/mixed_precision/__init__.py`` tries Machete before Marlin; ``machete.py`` repacks
qweight and scales and never touches qzeros / g_idx; ``marlin.py`` replaces both with empty
tensors unless act order; ``gptq.py`` empties g_idx without act order.) With act order a
row-parallel layer split over TP keeps the scales (exllama: and qzeros) of the whole K on
every GPU (``marlin_repeat_scales_on_all_ranks``). K and N are one GPU's
input and output sizes of a fused vLLM layer (qkv_proj, gate_up_proj). An asymmetric
checkpoint's zeros are priced already (``WeightFormat.zero_bits``). MoE experts run
``GPTQMarlinMoEMethod`` and are not counted here.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvplan.costs.memory.params import Part, layer_parts, pp_layer_ranges
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv

MARLIN_GROUPS = (-1, 32, 64, 128)
"""``MARLIN_SUPPORTED_GROUP_SIZES``: group sizes gptq_marlin (and Machete: -1, 64, 128) take."""
MACHETE_GROUPS = (-1, 64, 128)
MACHETE_TILE = (64, 128)
GPTQ_SCALE_BYTES = 2
"""fp16 / bf16 scales (``params_dtype``; GPTQ Marlin serves no float32 activations)."""
"""``check_machete_supports_shape``: K a multiple of 64, N of 128."""


def gptq_kernel(model: ModelSpec, hw: HardwareSpec, quantization: str | None) -> str | None:
    """'machete', 'marlin' or 'exllama' for a GPTQ checkpoint's linear layers; None otherwise."""
    if model.quantization not in ("gptq", "gptq_marlin") or model.quant_layout is None:
        return None
    _, bits, group, zero_bits = model.quant_layout
    forced = quantization is not None and quantization.strip().lower() == "gptq"
    if forced or zero_bits or bits not in (4, 8) or group not in MARLIN_GROUPS:
        return "exllama"  # GPTQMarlinConfig.TYPE_MAP holds (4, sym) and (8, sym) only
    return "machete" if hw.arch.lower().startswith("hopper") else "marlin"


def _fused(m: ModelSpec, layer: int, tp: int) -> Iterator[tuple[int, int, int]]:
    """(N, K, full K) of each vLLM linear layer GPTQ converts (a row-parallel layer's K is
    split over TP; q, k and v fuse into one layer)."""
    qkv = [0, 0]
    for p in layer_parts(m, layer):
        if not p.linear or p.role in ("experts", "embedding", "lm_head", "router"):
            continue
        n, k = p.shape_on_gpu(tp)
        if _in_qkv(m, p):
            qkv = [qkv[0] + n, k]
        else:
            yield n, k, p.cols if p.shard == "row" else k
    if qkv[0]:
        yield qkv[0], qkv[1], qkv[1]


def _in_qkv(m: ModelSpec, p: Part) -> bool:
    """q, k or v of a (non-MLA) attention layer: one QKVParallelLinear in vLLM."""
    return (m.mla is None and p.role == "attention" and p.shard in ("col", "kv")
            and p.cols == m.hidden_size)


def _layer_bytes(kernel: str, m: ModelSpec, n: int, k: int, k_full: int) -> int:
    """Bytes one fused layer keeps beyond the qweight and per-GPU scales priced as weights.

    Act order on a row-parallel layer split over TP (``marlin_repeat_scales_on_all_ranks``;
    ``GPTQLinearMethod`` likewise) loads the scales (and qzeros) of the whole K on every GPU:
    K_full / group rows, not K / group."""
    assert m.quant_layout is not None
    _, bits, group, zero_bits = m.quant_layout
    act_order, k_split = m.quant_desc_act, k < k_full
    groups = 1 if group == -1 else k // group
    kept = groups if not (act_order and k_split) else k_full // group
    qzeros = kept * (n * bits // 32) * 4
    extra_scales = (kept - groups) * n * GPTQ_SCALE_BYTES
    if kernel == "machete" and (
            (act_order and k_split) or group not in MACHETE_GROUPS
            or k % MACHETE_TILE[0] or n % MACHETE_TILE[1]):
        kernel = "marlin"
    if kernel == "machete":
        return qzeros + 4 * k + (4 * k if act_order else 0)
    if kernel == "marlin":
        return extra_scales + (8 * k if act_order else 0)
    priced = cdiv(n * groups * zero_bits, 8)  # an asymmetric checkpoint's zeros, in the weights
    return extra_scales + qzeros - priced + (4 * k if act_order else 0)


def gptq_kernel_bytes(model: ModelSpec, hw: HardwareSpec, *, quantization: str | None,
                      tp: int, pp: int, stage: int | None = None) -> int:
    """Bytes vLLM's GPTQ kernel keeps beyond the checkpoint's values and scales on the
    fullest GPU, or on pipeline stage ``stage`` (0 unless a GPTQ checkpoint)."""
    kernel = gptq_kernel(model, hw, quantization)
    if kernel is None:
        return 0

    def stage_bytes(layers: range) -> int:
        return sum(_layer_bytes(kernel, model, n, k, k_full)
                   for i in layers for n, k, k_full in _fused(model, i, tp))

    ranges = pp_layer_ranges(model.num_layers, pp)
    if stage is not None:
        return stage_bytes(ranges[stage])
    return max(stage_bytes(r) for r in ranges)
