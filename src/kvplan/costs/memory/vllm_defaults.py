"""vLLM 0.11 defaults and calibrated memory constants (CUDA-visible totals, sampler, buffers)."""

from __future__ import annotations

from kvplan.specs.hardware import HardwareSpec
from kvplan.units import GiB, MiB

VLLM_VERSION = "0.11.0"
DEFAULT_BLOCK_SIZE = 16
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
FLASHMLA_BLOCK_SIZE = 64
"""FlashMLA (vLLM's default MLA backend on Hopper) pages the latent cache in blocks of 64."""
CUTLASS_MLA_BLOCK_SIZE = 128
"""CUTLASS MLA (vLLM 0.11's default MLA backend on Blackwell) needs blocks of 128."""
HYBRID_KERNEL_BLOCK_ALIGNMENT = 16
"""Hybrid attention + state models: the attention block is raised to a multiple of this
(vLLM 0.11.0 HybridAttentionMambaModelConfig: "some attention backends (e.g. FA) only support
block sizes that are multiples of 16"). Later 0.11.x releases use 64 (128 with CUTLASS MLA) for
MLA hybrids and 32 for head size 256 on Blackwell with FlashInfer; not modelled."""

ECC_RESERVE_MIB = 467
"""nvidia-smi total minus what CUDA reports, on data-center GPUs: H100 479 MiB, L4 455 MiB."""
# torch.cuda.mem_get_info()[1] as vLLM logs it ("Free memory on device (x/TOTAL GiB)").
# The datasheet's "80 GB" is 80 GiB of HBM less what the driver reserves.
CUDA_TOTAL_BYTES: dict[str, int] = {
    # 79.18 GiB: llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md
    "h100-sxm-80gb": 85_020_000_000,
    "h100-pcie-80gb": 85_020_000_000,
    # H800 SXM: the same 80 GB HBM3 stack as H100 SXM (no public vLLM log of its own)
    "h800-sxm-80gb": 85_020_000_000,
    # 23.69 GiB (25,438,715,904 B): RTX 3090 as torch reports it (vLLM issue #10517 era logs)
    "rtx-3090": 25_438_715_904,
    # 79.25 GiB: A100-SXM4-80GB, vLLM v1 "Free memory on device (46.41/79.25 GiB) on startup"
    # (A100 deployment notes quoted in several public repositories, 2025)
    "a100-80gb-sxm": round(79.25 * GiB),
    # 139.72 GiB: H200, vLLM issue #23192 "Free memory on device (7.34/139.72 GiB) on startup"
    "h200-sxm-141gb": round(139.72 * GiB),
    # 22.05 GiB: L4, "free memory on device cuda:0 (19.77/22.05 GiB) on startup" (vLLM under
    # PyTorch's release CI, pytorch/pytorch#175666); nvidia-smi shows 23,034 MiB
    "l4": round(22.05 * GiB),
    # 23.64 GiB: RTX 4090, PyTorch "GPU 0 has a total capacty of 23.64 GiB"
    # (3DTopia/Phidias-Diffusion#8); nvidia-smi shows 24,564 MiB
    "rtx-4090": round(23.64 * GiB),
    # 178.35 GiB: B200, torch "Total VRAM: 178.35 GB" (GiB) (unslothai/unsloth#3411)
    "b200-sxm-180gb": round(178.35 * GiB),
    # 191.98 GiB: MI300X (192 GiB of HBM3), vLLM 0.28 on ROCm "Free memory 191.46/191.98 GiB"
    # and PyTorch "HIP out of memory ... GPU 0 has a total capacity of 191.98 GiB"
    "mi300x": round(191.98 * GiB),
    # 255.98 GiB: MI325X (256 GiB of HBM3e), vLLM ROCm issue reports "AMD MI325X x 8
    # (255.98 GiB HBM each)" and "HIP out of memory ... total capacity of 255.98 GiB"
    "mi325x": round(255.98 * GiB),
    # 44.42 GiB: L40S, vLLM 0.10.2 on 8 x L40S "Free memory on device (43.93/44.42 GiB) on
    # startup. Desired GPU memory utilization is (0.9, 39.98 GiB)" (nvidia-smi: 46,068 MiB, so
    # CUDA keeps 582 MiB here, not 467); the same 44.42 in RunPod vLLM logs on 48 GB Ada /
    # Ampere parts. Derived as 46,068 - 467 MiB (44.53 GiB) until 2026-12-08.
    "l40s": round(44.42 * GiB),
    # 184.31 GiB: GB200, PyTorch "GPU 0 has a total capacity of 184.31 GiB" under vLLM on
    # GB200 trays (DeepSeek-V4 decode at EP 8; a DP4 CUDA-graph capture OOM "on the 184 GiB
    # GB200") and in three more GB200 OOM reports. nvidia-smi shows 189,471 MiB: CUDA keeps
    # 738 MiB, as on B200 (183,359 MiB -> 178.35 GiB: 729), not the 467 of H100 and L4
    "gb200": round(184.31 * GiB),
    # Derived, no log: nvidia-smi's total (modal-labs/modal-client#2797: A10 23,028 MiB) less
    # the ~467 MiB CUDA reserves on the ECC parts measured above (H100 81,559 MiB -> 79.18 GiB:
    # 479 MiB; L4 23,034 MiB -> 22.05 GiB: 455 MiB)
    "a10g": (23_028 - ECC_RESERVE_MIB) * MiB,
}
_RESERVED_FRACTION = 0.0104
"""Unmeasured GPUs: nominal GiB less ~1% (H100: 80 GiB -> 79.18 GiB is 1.02% reserved)."""


def cuda_total_bytes(hw: HardwareSpec) -> int:
    """Total device memory as CUDA reports it (what vLLM multiplies by the utilization)."""
    known = CUDA_TOTAL_BYTES.get(hw.id.lower())
    if known is not None:
        return known
    nominal_gib = hw.memory_bytes / 10**9
    return int(nominal_gib * GiB * (1 - _RESERVED_FRACTION))


def mla_kernel_block_size(hw: HardwareSpec) -> int | None:
    """Block size vLLM 0.11's default MLA backend needs on ``hw`` (None: any block works).

    Hopper runs FlashMLA (blocks of 64), Blackwell CUTLASS MLA (128); Ampere, Ada and ROCm
    fall back to a backend without a block constraint (ROCm's AITER MLA, block 1, is opt-in).
    """
    arch = hw.arch.lower()
    if arch.startswith("hopper"):
        return FLASHMLA_BLOCK_SIZE
    if arch.startswith("blackwell"):
        return CUTLASS_MLA_BLOCK_SIZE
    return None


def mla_backend_name(hw: HardwareSpec) -> str:
    """The MLA backend vLLM 0.11 picks by default on ``hw``, as its log lines name it."""
    arch = hw.arch.lower()
    if arch.startswith("hopper"):
        return "FlashMLA"
    return "CUTLASS_MLA" if arch.startswith("blackwell") else "TRITON_MLA"


def default_batch_limits(hw: HardwareSpec) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for ``vllm serve`` (EngineArgs.get_batch_defaults).

    >= 70 GiB and not an A100: 8192 tokens / 1024 seqs; otherwise 2048 / 256.
    """
    big = cuda_total_bytes(hw) >= 70 * GiB and "a100" not in hw.id.lower()
    return (8192, 1024) if big else (2048, 256)


def default_max_num_seqs(hw: HardwareSpec, max_num_batched_tokens: int | None) -> int:
    """max_num_seqs when --max-num-seqs is not given: the GPU class's default, capped at a
    given token budget (EngineArgs: ``min(default, max_num_batched_tokens)``)."""
    seqs = default_batch_limits(hw)[1]
    return seqs if max_num_batched_tokens is None else min(seqs, max_num_batched_tokens)


# ---------------------------------------------------------------- calibrated constants
SAMPLER_FP32_BYTES_PER_LOGIT = 36
"""Bytes per (request x vocab) logit alive at the peak of vLLM's dummy sampler run on top of the
model-dtype logits: fp32 logits (4), sorted values (4) + int64 sort indices (8) for top-k/top-p,
softmax of the sorted values (4), its cumulative sum (4), two bool masks (2), the scattered
logits (4), probabilities (4) and the exponential noise (2 of 4 already freed). Fitted on
vLLM 0.11 H100 logs: Llama-3.1-8B 4.76, Qwen3-0.6B 5.56, Qwen3-32B 5.64, gpt-oss-20b 7.38 GiB."""
NON_TORCH_BASE_BYTES = 133 * MiB
"""CUDA context growth after vLLM's first snapshot (cuBLAS/cuDNN workspaces): 0.13 GiB at TP1."""
COMM_BUFFER_BYTES = 420 * MiB
"""TP > 1: NCCL channel buffers + custom all-reduce IPC buffers: 0.54-0.55 GiB at TP2 (logs)."""
PCIE_COMM_BUFFER_BYTES = 80 * MiB
"""The same on a PCIe-only part: vLLM 0.10.2 TP 8 + EP on 8 x L40S logs 0.17-0.21 GiB of
non-torch memory a rank (tim-roethig/ai-platform qwen3_235b_on_8xl40s.md; the custom
all-reduce is off there): 0.21 - 0.13 GiB. vllm#20665 (4 x L4, TP 2 x PP 2) implies about
0.25 GiB, RTX 4090 TP 2 (v0.7, vllm#13061) 0.25."""


def pcie_only(hw: HardwareSpec) -> bool:
    """GPUs joined by PCIe alone (L40S, L4, A10G, RTX 4090: their catalog interconnect)."""
    return hw.interconnect.lower().startswith("pcie")
FUSED_MOE_CHUNK_TOKENS = 16 * 1024
"""VLLM_FUSED_MOE_CHUNK_SIZE: fused_experts works through the tokens in chunks of this many."""
CUDAGRAPH_MAX_CAPTURE = 512
"""Largest batch vLLM 0.11 captures in a CUDA graph by default."""
GPT_OSS_MAX_CAPTURE = 992
"""gpt-oss's largest captured batch (vLLM 0.11 ``GptOssForCausalLMConfig``)."""
