"""The 16-bit copy of ``kv_b_proj`` vLLM 0.11's MLA attention keeps when the weights are quantized.

``MLACommonImpl.process_weights_after_loading`` (``v1/attention/backends/mla/common.py``) splits
kv_b_proj into ``W_UK_T`` and ``W_UV`` for the absorbed decode path. "We currently do not have
quantized bmm's ... we just store fp16/bf16 copies": a quantized kv_b_proj (fp8, GPTQ, ...) is
dequantized (``quant_method.apply`` on an identity) into a new kv_lora_rank x heads/tp x
(qk_nope + v) tensor in the activation dtype, which both views keep alive for the life of the
engine, and "Model loading took" counts it. A 16-bit kv_b_proj is only viewed, not copied.

DeepSeek-V3 (fp8, 128 heads, 512 x (128 + 128)) at TP 8: 512 x 16 x 256 x 2 B = 4 MiB a layer,
61 layers = 244 MiB on every GPU.
"""

from __future__ import annotations

from kvplan.costs.memory.params import layer_parts, pp_layer_ranges
from kvplan.costs.memory.weight_formats import FormatArg, dtype_bytes, given_format
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv


def mla_absorbed_bytes(
    model: ModelSpec,
    *,
    dtype: str,
    quantization: str | None,
    tp: int,
    pp: int,
    stage: int | None = None,
    fmt: FormatArg = ...,
) -> int:
    """Bytes of the dequantized W_UK / W_UV copy on the fullest GPU (or on ``stage``); 0 for
    a model without MLA or with a 16-bit kv_b_proj (also one its ignore list keeps)."""
    a = model.mla
    fmt = given_format(
        fmt, quantization, model.quantization, model.weight_block_size, model.quant_layout
    )
    if a is None or fmt is None or "attention" not in fmt.roles:
        return 0
    ranges = pp_layer_ranges(model.num_layers, pp)
    copied = [sum(not _kv_b_kept(model, i) for i in r) for r in ranges]
    layers = max(copied) if stage is None else copied[stage]
    heads = cdiv(model.num_attention_heads, tp)
    per_layer = a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim)
    return layers * per_layer * dtype_bytes(dtype, model.dtype)


def _kv_b_kept(model: ModelSpec, layer: int) -> bool:
    """Whether the checkpoint's ignore list keeps layer ``layer``'s kv_b_proj 16-bit."""
    a = model.mla
    assert a is not None
    rows = model.num_attention_heads * (a.qk_nope_head_dim + a.v_head_dim)
    return any(p.kept and p.role == "attention" and (p.rows, p.cols) == (rows, a.kv_lora_rank)
               for p in layer_parts(model, layer))
