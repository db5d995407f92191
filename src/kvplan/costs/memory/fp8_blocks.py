"""vLLM 0.11's refusal of block-quantized fp8 weights that a TP degree would cut mid-block.

A checkpoint with ``weight_block_size`` [bn, bk] (DeepSeek-V3, Qwen3-*-FP8: 128 x 128) keeps
one scale per bn x bk block, so every tensor-parallel shard must hold whole blocks. vLLM checks
it when it builds the layers and stops::

    fused MoE (fp8.py Fp8MoEMethod.create_weights)
        "The output_size of gate's and up's weight = I/tp is not divisible by weight
         quantization block_n = bn."      (and down's input I/tp by block_k)
    linear layers (fp8_utils.validate_fp8_block_shape)
        column-parallel outputs (q, k, v, gate, up) per shard % bn, row-parallel inputs
        (o_proj, down_proj) per shard % bk

Qwen3-235B-A22B-FP8 (moe_intermediate_size 1536) at TP 8: 192 per shard, refused; vLLM's
recipes run it at TP 4 or with expert parallelism. Replicated layers (MLA down-projections,
router) are whole on every GPU and always pass.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvplan.errors import InputError
from kvplan.specs.model import ModelSpec


def check_fp8_blocks(model: ModelSpec, block: tuple[int, int] | None, tp: int,
                     moe_tp: int | None = None) -> None:
    """Raise InputError, as vLLM would, when TP ``tp`` splits a quantization block; the
    routed experts split over ``moe_tp`` (tp x dp without EP, 1 with EP; default tp)."""
    moe_tp = tp if moe_tp is None else moe_tp
    if block is None or (tp == 1 and moe_tp == 1):
        return
    bn, bk = block
    for what, size, axis in _shards(model, tp, moe_tp):
        need = bn if axis == "output" else bk
        if size % need:  # a fractional shard (TP not dividing) never holds whole blocks
            name = "block_n" if axis == "output" else "block_k"
            raise InputError(
                f"vLLM refuses --tensor-parallel-size {tp} for {model.name}: the {what} = "
                f"{size:g} per GPU is not divisible by weight quantization {name} = {need}; "
                f"use a TP degree that keeps it a multiple of {need}"
                + (" or add --enable-expert-parallel (whole experts per GPU)"
                   if what.startswith(("output_size of gate", "input_size of down")) else "")
            )


Shard = tuple[str, float, str]


def _shards(model: ModelSpec, tp: int, moe_tp: int) -> Iterator[Shard]:
    """(what vLLM calls it, size per GPU, 'output' or 'input') of every TP-split fp8 weight."""
    moe = model.moe
    if moe is not None:
        per = moe.moe_intermediate_size / moe_tp
        yield "output_size of gate's and up's weight", per, "output"
        yield "input_size of down's weight", per, "input"
        if moe.shared_expert_intermediate_size:
            yield from _mlp("shared expert", moe.shared_expert_intermediate_size, tp)
    if moe is None or model.has_dense_mlp:
        yield from _mlp("MLP", model.intermediate_size, tp)
    yield from _attention(model, tp)


def _mlp(label: str, inter: int, tp: int) -> Iterator[Shard]:
    yield f"{label} gate/up output_partition_size", inter / tp, "output"
    yield f"{label} down_proj input_size_per_partition", inter / tp, "input"


def _attention(model: ModelSpec, tp: int) -> Iterator[Shard]:
    heads = model.num_attention_heads / tp
    if model.mla is not None:
        a = model.mla
        yield ("q projection output_partition_size",
               heads * (a.qk_nope_head_dim + a.qk_rope_head_dim), "output")
        yield ("kv_b_proj output_partition_size",
               heads * (a.qk_nope_head_dim + a.v_head_dim), "output")
        yield "o_proj input_size_per_partition", heads * a.v_head_dim, "input"
        return
    kv = max(1, model.num_kv_heads // tp)
    yield "q output_partition_size", heads * model.head_dim, "output"
    yield "k/v output_partition_size", kv * model.head_dim, "output"
    yield "o_proj input_size_per_partition", heads * model.v_head_dim, "input"
