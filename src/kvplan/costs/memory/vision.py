"""The vision tower vLLM loads beside a multimodal model's language model (Gemma 3's SigLIP
encoder and projector): its weight bytes on one GPU, in the served dtype.

vLLM 0.11 ``siglip.py`` / ``gemma3_mm.py`` (H = vision hidden, I = intermediate, P = patch,
C = channels, N = (image / P)^2 positions, D = the text model's hidden)::

    patch_embedding   Conv2d(C, H, P, P) + bias            replicated
    position_embedding  N x H (VocabParallelEmbedding)     rows padded to 64, / tp
    per layer         qkv_proj 3H x H + bias (column), out_proj H x H (row) + bias,
                      fc1 I x H + bias (column), fc2 H x I (row) + bias, 2 LayerNorms (2H)
    post_layernorm    2H
    head (vision_use_head; not Gemma 3)  probe H, MultiheadAttention 4H x H + 4H, LayerNorm,
                      an MLP like the layers'
    projector         mm_input_projection_weight H x D, mm_soft_emb_norm H   replicated

vLLM builds the tower on every pipeline stage, whatever the prompts hold. kvplan keeps it in
the 16-bit dtype under ``--quantization`` (vLLM's online fp8 converts its q/k/v/o too; its
MLP, 4304 wide, is not a multiple of 64 and stays 16-bit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.costs.memory.params import Part
from kvplan.costs.memory.weight_formats import dtype_bytes
from kvplan.specs.model import ModelSpec, VisionSpec
from kvplan.units import cdiv

if TYPE_CHECKING:
    from kvplan.costs.memory.settings import Settings

IMAGE_FRAME_TOKENS = 4
"""Prompt tokens around each Gemma 3 image's embeddings: its placeholder is transformers'
``Gemma3Processor.full_image_sequence``, '\\n\\n' <start_of_image> 256 x <image_soft_token>
<end_of_image> '\\n\\n' ('\\n\\n' is one token; Gemma's own tokenizer tests spell an image
[108, 255999, n x soft, 256000, 108]): 260 tokens, 256 of them embeddings."""
MM_LIMIT_PER_PROMPT = 999
"""vLLM 0.11's default --limit-mm-per-prompt for each modality (MultiModalConfig)."""


def _layer(v: VisionSpec, count: int) -> tuple[Part, ...]:
    h, i = v.hidden_size, v.intermediate_size
    return (
        Part(role="attention", rows=3 * h, cols=h, shard="col", count=count),
        Part(role="attention", rows=3 * h, shard="col", count=count, linear=False),
        Part(role="attention", rows=h, cols=h, shard="row", count=count),
        Part(role="attention", rows=h, count=count, linear=False),
        Part(role="dense_mlp", rows=i, cols=h, shard="col", count=count),
        Part(role="dense_mlp", rows=i, shard="col", count=count, linear=False),
        Part(role="dense_mlp", rows=h, cols=i, shard="row", count=count),
        Part(role="dense_mlp", rows=h, count=count, linear=False),
        Part(role="norms", rows=4 * h, count=count, linear=False),
    )


def vision_parts(v: VisionSpec) -> tuple[Part, ...]:
    """Every weight of the tower and its projector, split the way vLLM shards them."""
    h, positions = v.hidden_size, (v.image_size // v.patch_size) ** 2
    head: tuple[Part, ...] = ()
    if v.use_head:  # torch MultiheadAttention (replicated) + LayerNorm + an MLP
        head = (Part(role="attention", rows=4 * h + 1, cols=h, linear=False),
                Part(role="attention", rows=4 * h, linear=False),
                Part(role="norms", rows=2 * h, linear=False), *_layer(v, 1)[4:8])
    return (
        Part(role="embedding", rows=h, cols=v.num_channels * v.patch_size ** 2 + 1,
             linear=False),
        Part(role="embedding", rows=positions, cols=h, shard="vocab", linear=False),
        *_layer(v, v.num_layers),
        Part(role="norms", rows=2 * h, linear=False),
        *head,
        Part(role="embedding", rows=h, cols=v.projector_out, linear=False),
        Part(role="norms", rows=h, linear=False),
    )


def vision_params(model: ModelSpec) -> int:
    """Parameters of the vision tower and projector (0 for a text-only model)."""
    return 0 if model.vision is None else sum(p.params for p in vision_parts(model.vision))


def vision_bytes(model: ModelSpec, dtype: str = "auto", tp: int = 1) -> int:
    """Bytes of the vision tower and projector on one GPU at TP ``tp``, in the --dtype."""
    if model.vision is None:
        return 0
    width = dtype_bytes(dtype, model.dtype)
    return sum(p.count * r * c * width for p in vision_parts(model.vision)
               for r, c in (p.shape_on_gpu(tp),))


def encoder_cache_bytes(model: ModelSpec, s: Settings) -> int:
    """The dummy image embeddings vLLM 0.11's ``profile_run`` keeps in its encoder cache
    while the language model's dummy pass runs, so they add to the profiled peak.

    ``MultiModalBudget``: an image takes ``per_item`` = image_tokens + IMAGE_FRAME_TOKENS
    prompt tokens (``get_mm_max_contiguous_tokens``, placeholders included); the encoder
    budget is max(max_num_batched_tokens, per_item) (``compute_mm_encoder_budget``: both its
    compute budget and cache size default to max_num_batched_tokens); it encodes
    max(1, min(budget // per_item, max_num_seqs x max(1, min(999, max_model_len //
    per_item)))) images, and each output of image_tokens rows is copied into a zeroed
    (per_item, hidden) tensor (vllm#25810) kept until the dummy pass ends, in the --dtype.
    gemma-3-27b-it at 8192 tokens: 31 images ("profiled with 31 image items") x 260 x 5376
    x 2 B = 86,661,120 B."""
    v = model.vision
    if v is None:
        return 0
    per_item = v.image_tokens + IMAGE_FRAME_TOKENS
    return _dummy_images(v, s) * per_item * v.projector_out * dtype_bytes(s.dtype, model.dtype)


def _dummy_images(v: VisionSpec, s: Settings) -> int:
    """Images in the profiling run's dummy batch (``MultiModalBudget.get_max_items``)."""
    per_item = v.image_tokens + IMAGE_FRAME_TOKENS
    budget = max(s.max_num_batched_tokens, per_item)
    per_prompt = max(1, min(MM_LIMIT_PER_PROMPT, s.max_model_len // per_item))
    return max(1, min(budget // per_item, s.max_num_seqs * per_prompt))


def encoder_pass_bytes(model: ModelSpec, s: Settings) -> int:
    """Torch peak of the profiling run's dummy encoder pass, before the language model's:
    the dummy images' pixels (the processor's float32 values and the tower's --dtype copy,
    ``pixel_values.to(dtype)``) and, at its largest, one SigLIP layer's MLP over every patch
    token: the residual, layer_norm2's output, fc1's output (column-parallel: I / tp) and the
    activation's, each tokens x width x --dtype bytes. gemma-3-27b-it, 31 images of 896 px
    in 14 px patches: 31 x 3 x 896^2 x (4 + 2) + 31 x 4096 x (2 x 1152 + 2 x 4304) x 2 B =
    447,971,328 + 2,771,124,224 = 3,219,095,552 B; above the language model's peak when
    --max-num-seqs is small (the sampler's logits are then small)."""
    v = model.vision
    if v is None:
        return 0
    b, images = dtype_bytes(s.dtype, model.dtype), _dummy_images(v, s)
    pixels = images * v.num_channels * v.image_size ** 2 * (4 + (b if b != 4 else 0))
    tokens = images * (v.image_size // v.patch_size) ** 2
    return pixels + tokens * (2 * v.hidden_size + 2 * cdiv(v.intermediate_size, s.tp)) * b
