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
checkpoint's zeros are priced already (``WeightFormat.zero_bits``).

Routed experts (``gptq_expert_bytes``) run ``GPTQMarlinMoEMethod`` where
``check_moe_marlin_supports_layer`` passes (hidden % 128, the GPU's expert intermediate
% max(64, group)), which never frees ``w13_qzeros`` / ``w2_qzeros`` (``params_dtype``, K/g x
N / pack each) and keeps the sorted g_idx + sort indices with act order (whose w2 scales and
zeros cover the whole intermediate on every GPU). Elsewhere (and under ``-q gptq``) they run
``MoeWNA16Method``: no zeros or g_idx (GPTQ is loaded as symmetric), but a group that does
not divide the GPU's intermediate is halved until it does, each scale repeated. AWQ MoE
experts take the same test: ``AWQMoEMethod`` (Marlin) holds what is priced; MoeWNA16Method
repeats an AWQ checkpoint's scales and zeros alike.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvplan.costs.memory.params import VOCAB_PADDING, Part, layer_parts, pp_layer_ranges
from kvplan.costs.memory.weight_formats import dtype_bytes
from kvplan.errors import InputError
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
        if not p.linear or p.kept or p.role in ("experts", "embedding", "lm_head", "router"):
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
    fullest GPU, or on pipeline stage ``stage`` (0 unless a GPTQ checkpoint); a quantized
    lm_head (``lm_head: true``) on the last stage runs the same kernel."""
    kernel = gptq_kernel(model, hw, quantization)
    if kernel is None:
        return 0

    ranges = pp_layer_ranges(model.num_layers, pp)

    def stage_bytes(s: int) -> int:
        head = s == pp - 1 and model.quant_lm_head and not model.tie_word_embeddings
        n_head = cdiv(model.vocab_size, VOCAB_PADDING) * VOCAB_PADDING // tp
        layers = [*(f for i in ranges[s] for f in _fused(model, i, tp)),
                  *([(n_head, model.hidden_size, model.hidden_size)] if head else [])]
        return sum(_layer_bytes(kernel, model, n, k, k_full) for n, k, k_full in layers)

    return stage_bytes(stage) if stage is not None else max(map(stage_bytes, range(pp)))


def gptq_moe_kernel(model: ModelSpec, hw: HardwareSpec, quantization: str | None,
                    moe_tp: int) -> str | None:
    """'marlin' (GPTQMarlinMoEMethod), 'awq_marlin' (AWQMoEMethod) or 'wna16'
    (MoeWNA16Method) for a GPTQ or AWQ MoE's routed experts at expert TP ``moe_tp``."""
    layout = model.quant_layout
    if model.moe is None or layout is None:
        return None
    awq = layout[0] == "awq" and model.quantization in ("awq", "awq_marlin")
    kernel = "awq" if awq else gptq_kernel(model, hw, quantization)
    if kernel is None:
        return None
    group, i_pp = layout[2], model.moe.moe_intermediate_size // moe_tp
    if (kernel != "exllama" and group in MARLIN_GROUPS and model.hidden_size % 128 == 0
            and i_pp % max(64, group) == 0):  # check_moe_marlin_supports_layer
        return "awq_marlin" if awq else "marlin"
    return "wna16"  # GPTQConfig's MoE (sym forced True) or the Marlin fallback


def check_moe_experts(model: ModelSpec, hw: HardwareSpec, quantization: str | None,
                      moe_tp: int) -> None:
    """Raise InputError where vLLM 0.11 cannot build a GPTQ / AWQ MoE's experts: on
    MoeWNA16Method (``gptq_moe_kernel`` 'wna16') only 4- or 8-bit weights load, and the
    group it halves to divide the GPU's expert intermediate may not fall below 32."""
    if gptq_moe_kernel(model, hw, quantization, moe_tp) != "wna16":
        return
    assert model.quant_layout is not None and model.moe is not None
    _, bits, group, _ = model.quant_layout
    h, i_pp = model.hidden_size, model.moe.moe_intermediate_size // moe_tp
    why = ""
    if bits not in (4, 8):
        why = f"it takes 4- or 8-bit weights, not {bits}-bit"
    elif group != -1 and _wna16_group(group, h, i_pp) < 32:
        why = (f"group {group} would be halved below 32 to divide the {i_pp} intermediate "
               f"rows each GPU holds of an expert (moe_intermediate_size / {moe_tp})")
    if why:
        raise InputError(
            f"vLLM 0.11 cannot load the routed experts of {model.name}: they run "
            f"MoeWNA16Method (no Marlin MoE for this checkpoint at this split), and {why}")


def _wna16_group(group: int, h: int, i_pp: int) -> int:
    """MoeWNA16Method.create_weights: the group halved until it divides both sizes."""
    while group > 1 and (i_pp % group or h % group):
        group //= 2
    return group


def _groups(k: int, group: int) -> int:
    """Scale rows of a K-long input as kvplan prices them (``WeightFormat.linear_bytes``)."""
    return 1 if group == -1 else cdiv(k, group)


def _expert_bytes(kernel: str, m: ModelSpec, i_pp: int, dtype_b: int) -> int:
    """Bytes one routed expert holds on a GPU beyond its priced values, scales and zeros."""
    assert m.quant_layout is not None and m.moe is not None
    _, bits, group, zero_bits = m.quant_layout
    h, i_full, act = m.hidden_size, m.moe.moe_intermediate_size, m.quant_desc_act
    if kernel == "marlin":
        pack = 32 // bits
        s13 = 1 if group == -1 else h // group
        s2 = 1 if group == -1 else (i_full if act else i_pp) // group
        qzeros = (s13 * (2 * i_pp // pack) + s2 * (h // pack)) * dtype_b
        full_w2_scales = (s2 - _groups(i_pp, group)) * h * GPTQ_SCALE_BYTES
        return qzeros + full_w2_scales + (8 * (h + i_pp) if act else 0)
    if kernel == "awq_marlin":
        return 0  # AWQMoEMethod: 4-bit values, scales and 4-bit zeros, as priced
    priced = (2 * i_pp * _groups(h, group), h * _groups(i_pp, group))
    held = priced
    if group != -1:
        g = _wna16_group(group, h, i_pp)  # group_size_div_factor: each scale repeated
        held = (2 * i_pp * (h // g), h * (i_pp // g))
    held_zero_bits = zero_bits if m.quant_layout[0] == "awq" else 0  # GPTQ: has_zp False
    zeros = sum(n * held_zero_bits // 8 for n in held) - sum(cdiv(n * zero_bits, 8)
                                                             for n in priced)
    return (sum(held) - sum(priced)) * GPTQ_SCALE_BYTES + zeros


def gptq_expert_bytes(model: ModelSpec, hw: HardwareSpec, *, quantization: str | None,
                      dtype: str, moe_tp: int, local_experts: int, pp: int,
                      stage: int | None = None) -> int:
    """Bytes a GPTQ / AWQ MoE's routed experts keep beyond their priced weights on the
    fullest GPU (or on stage ``stage``): ``local_experts`` per MoE layer, each split over
    ``moe_tp`` (``ep_memory.expert_kernel_bytes`` finds both for a deployment)."""
    kernel = gptq_moe_kernel(model, hw, quantization, moe_tp)
    if kernel is None or model.moe is None:
        return 0
    per_layer = local_experts * _expert_bytes(
        kernel, model, model.moe.moe_intermediate_size // moe_tp, dtype_bytes(dtype, model.dtype))

    def stage_bytes(layers: range) -> int:
        return per_layer * sum(any(p.role == "experts" for p in layer_parts(model, i))
                               for i in layers)

    ranges = pp_layer_ranges(model.num_layers, pp)
    return stage_bytes(ranges[stage]) if stage is not None else max(map(stage_bytes, ranges))
