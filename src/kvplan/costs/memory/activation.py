"""The non-KV parts of vLLM 0.11's per-GPU budget: the profiling run's peak activation, the
non-torch memory, the rotary cache and the CUDA graph pool's estimate (costs/memory/plan.py
adds the weights and sizes the KV cache from what is left)."""

from __future__ import annotations

from kvplan.costs.memory import vllm_defaults as vd
from kvplan.costs.memory.settings import Settings
from kvplan.costs.memory.vision import encoder_cache_bytes, encoder_pass_bytes
from kvplan.costs.memory.weight_formats import dtype_bytes
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.max_len import FP32_ROPE
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv


def rope_cache_bytes(model: ModelSpec, dtype: str = "auto") -> int:
    """vLLM's rotary cos/sin cache: max_position_embeddings x rotary_dim, in the --dtype
    (rotary_dim: the head dim, MLA's rope dim, or the partial_rotary_factor share of it;
    float32 for the families that ask get_rope for it, ``FP32_ROPE``)."""
    rotary = model.mla.qk_rope_head_dim if model.mla is not None else model.head_dim
    if model.rotary_dim is not None:
        rotary = model.rotary_dim
    rows = model.rope_cache_positions or model.max_position_embeddings
    width = 4 if model.model_type in FP32_ROPE else dtype_bytes(dtype, model.dtype)
    return rows * rotary * width


def activation_bytes(model: ModelSpec, s: Settings, *, sampler: bool = True) -> int:
    """Torch peak during the profiling run: kept hidden states + a multimodal model's dummy
    encoder outputs (``vision.encoder_cache_bytes``) + max(layer, sampler) peak, or the dummy
    encoder pass run before it (``vision.encoder_pass_bytes``) where that is higher.

    The sampler term dominates: min(max_num_seqs, tokens) requests x vocab logits. Only the
    last pipeline stage runs the sampler (``sampler=False`` for the others). Activations are
    in the --dtype (float32: 4 bytes, and its logits are already the sampler's fp32 ones).
    """
    t, h, b = s.max_num_batched_tokens, model.hidden_size, dtype_bytes(s.dtype, model.dtype)
    resident = 2 * t * h * b  # hidden states + residual stream
    reqs = min(s.max_num_seqs, t) if sampler else 0
    per_logit = vd.SAMPLER_FP32_BYTES_PER_LOGIT + (b if b != 4 else 0)
    language = resident + encoder_cache_bytes(model, s) + max(
        reqs * model.vocab_size * per_logit,
        _layer_transient_bytes(model, t, s.tp, _moe_tp(model, s), b, _gathered_ranks(s)))
    return max(language, encoder_pass_bytes(model, s))


def _moe_tp(model: ModelSpec, s: Settings) -> int:
    """The routed experts' TP degree: tp, or tp x dp / 1 under DP / EP (memory/ep_layout.py)."""
    if s.dp == 1 and not s.expert_parallel:
        return s.tp
    from kvplan.costs.memory.ep_layout import parallel_layout

    return parallel_layout(model, s.tp, s.pp, s.dp, s.expert_parallel).moe_tp


GATHERING_BACKENDS = ("allgather_reducescatter",)
"""--all2all-backend values that run FusedMoE.forward_impl's naive dispatch under DP (every
rank's tokens all-gathered into each MoE layer); DeepEP's send only routed rows, in chunks."""


def _gathered_ranks(s: Settings) -> int:
    """The DP ranks whose tokens one MoE layer holds at once: dp under the gathering
    exchange, else 1 (DeepEP's paths, priced as one rank's tokens)."""
    return s.dp if s.all2all_backend in GATHERING_BACKENDS else 1


def _layer_transient_bytes(model: ModelSpec, tokens: int, tp: int, moe_tp: int,
                           b: int, dp: int = 1) -> int:
    """Largest per-layer intermediate: the dense MLP's up projection and activation output,
    or the fused MoE kernel's workspace (``_moe_workspace_bytes``; experts at ``moe_tp``,
    every one of ``dp`` ranks' ``tokens`` gathered)."""
    inter = model.intermediate_size
    width = inter * (3 if model.mlp_gated else 2)
    dense = tokens * width // tp * b
    return max(dense, _moe_workspace_bytes(model, tokens, moe_tp, b, dp))


def _moe_workspace_bytes(model: ModelSpec, tokens: int, tp: int, b: int, dp: int = 1) -> int:
    """vLLM 0.11 ``fused_experts_impl``: per chunk of M = min(rows, 16384) rows one buffer
    shared by the w13 output and the w2 output, M x topk x max(N, K), and the activation's,
    M x topk x N / 2 (N = 2 x I / tp the w13 width, K = hidden), in the activation dtype.

    With dp > 1 the MoE layer first gathers every DP rank's tokens (FusedMoE.forward_impl's
    naive dispatch: AgRsAll2AllManager.dispatch all_gatherv's hidden states and router
    logits; the profiling run has every rank at max_num_batched_tokens), so rows = dp x
    tokens, and the gathered rows x (hidden + experts) stay live around the kernel (it
    writes in place). ``dp``: the ranks gathered (``_gathered_ranks``)."""
    moe = model.moe
    if moe is None:
        return 0
    rows = dp * tokens
    m = min(rows, vd.FUSED_MOE_CHUNK_TOKENS)
    n = 2 * cdiv(moe.moe_intermediate_size, tp)
    per_pair = max(n, model.hidden_size) + n // 2
    gathered = rows * (model.hidden_size + moe.num_experts) * b if dp > 1 else 0
    return m * moe.experts_per_token * per_pair * b + gathered


def non_torch_bytes(s: Settings, hw: HardwareSpec | None = None) -> int:
    """CUDA context growth plus, with more than one GPU, communication buffers: smaller on a
    PCIe-only part (``vd.pcie_only``), whose NCCL runs few channels and where vLLM turns its
    custom all-reduce off ("not supported on more than two PCIe-only GPUs")."""
    if s.tp * s.pp * s.dp == 1:  # DP/EP groups talk too
        return vd.NON_TORCH_BASE_BYTES
    pcie = hw is not None and vd.pcie_only(hw)
    return vd.NON_TORCH_BASE_BYTES + (vd.PCIE_COMM_BUFFER_BYTES if pcie else vd.COMM_BUFFER_BYTES)


def cudagraph_bytes(model: ModelSpec, s: Settings) -> int:
    """Graph pool estimate: the largest captured batch's layer intermediates (display only;
    0 with --enforce-eager, which captures no graphs)."""
    if s.enforce_eager:
        return 0
    batch = min(vd.CUDAGRAPH_MAX_CAPTURE, 2 * s.max_num_seqs)
    if model.model_type == "gpt_oss":  # GptOssForCausalLMConfig: captures up to 992 whatever
        batch = vd.GPT_OSS_MAX_CAPTURE  # max_num_seqs (costs/step/cudagraph.py)
    b = dtype_bytes(s.dtype, model.dtype)
    moe_tp = _moe_tp(model, s)
    return (_layer_transient_bytes(model, batch, s.tp, moe_tp, b, _gathered_ranks(s))
            + 4 * batch * model.hidden_size * b)
