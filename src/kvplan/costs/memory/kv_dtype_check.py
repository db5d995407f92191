"""--kv-cache-dtype values vLLM's attention backend on a GPU refuses (checked per deployment;
``kvplan kv``, ``request`` and ``batch`` know no GPU: they refuse only what no GPU stores, an
MLA latent in a per-token-head or 4-bit format, or an nvfp4 head no kernel packs,
``check_mla_latent``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kvplan.costs.memory import vllm_defaults as vd
from kvplan.errors import InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv_precision import FP8_DS_MLA, KvPrecision
from kvplan.specs.model import ModelSpec

if TYPE_CHECKING:
    from kvplan.specs.kv import ModelKv


def check_kv_dtype(model: ModelSpec, hw: HardwareSpec, p: KvPrecision,
                   kv_cache_dtype: str) -> None:
    """Refuse ``p`` (``--kv-cache-dtype kv_cache_dtype`` resolved for ``model``) where the
    default attention backend on ``hw`` cannot store it.

    - MLA latent caches hold the model's dtype or per-tensor fp8 only: no vLLM MLA backend
      lists a per-token-head or nvfp4 format (FlashMLA: auto, fp8, fp8_e4m3; CUTLASS MLA:
      auto, bfloat16, fp8, fp8_e4m3; Triton MLA: auto, bfloat16).
    - MLA on a GPU without FlashMLA (Hopper) or CUTLASS MLA (Blackwell) runs Triton MLA, which
      raises "TritonMLA V1 with FP8 KV cache not yet supported" for any quantized cache
      (vLLM 0.11 ``v1/attention/backends/mla/triton_mla.py``).
    - nvfp4 (a later vLLM's name) is written by a cache kernel built for SM100 / SM120 only
      (``ENABLE_NVFP4_SM100`` / ``_SM120`` in csrc/cache_kernels.cu): Blackwell.
    - fp8_inc and fp8_e5m2 where no kernel takes them (``_check_fp8_flavour``).
    - nvfp4 for a head size its 16-value groups cannot pack (``fp4_head_problem``).
    - any fp8 cache on Ampere, where vLLM runs Triton attention (``_check_ampere_fp8``).
    """
    if p.value_bits >= 16 or p.name == FP8_DS_MLA.name:
        return
    flag = f"--kv-cache-dtype {kv_cache_dtype}"
    _check_fp8_flavour(model, hw, p, kv_cache_dtype.strip().lower(), flag)
    _check_ampere_fp8(model, hw, p, flag)
    if p.name == "nvfp4" and not hw.arch.lower().startswith("blackwell"):
        raise InputError(f"{flag}: vLLM's nvfp4 KV cache kernels run on Blackwell only, not "
                         f"{hw.id} ({hw.arch}); use --kv-cache-dtype fp8 or a Blackwell GPU")
    if model.mla is None:
        _check_fp4_heads(p, (model.head_dim, model.v_head_dim), flag)
        return
    if not mla_stores(p):
        raise InputError(_mla_refusal(flag, p))
    backend = vd.mla_backend_name(hw)
    if backend == "TRITON_MLA":
        raise InputError(f"{flag}: on {hw.id} vLLM runs MLA with {backend}, which refuses a "
                         "quantized KV cache (\"TritonMLA V1 with FP8 KV cache not yet "
                         "supported\"); use --kv-cache-dtype auto, or a Hopper or Blackwell "
                         "GPU (FlashMLA, CUTLASS MLA: fp8)")


def _check_fp8_flavour(model: ModelSpec, hw: HardwareSpec, p: KvPrecision, name: str,
                       flag: str) -> None:
    """vLLM 0.11 fp8 names no kernel on ``hw`` takes (the server stops at its first forward).

    - fp8_inc is Intel Gaudi's (HPU) format: the CUDA and ROCm cache writes
      (``DISPATCH_BY_KV_CACHE_DTYPE``, csrc/quantization/fp8/{nvidia,amd}/quant_utils.cuh) know
      auto, fp8, fp8_e4m3 (+ fp8_e5m2 on CUDA): "Unsupported data type of kv cache: fp8_inc".
    - fp8_e5m2 on ROCm: the amd dispatch has e4m3 only ("ROCm supports fp8 (=fp8_e4m3)").
    - fp8_e5m2 on Hopper outside MLA: FlashAttention 3 reads e4m3 only
      (``FlashAttentionBackend.get_fp8_dtype_for_flashattn``: "Unrecognized FP8 dtype");
      Ada runs Triton attention and Blackwell FlashInfer, which take it (Ampere refuses every
      fp8 cache: ``_check_ampere_fp8``).
    """
    arch = hw.arch.lower()
    if name == "fp8_inc":
        raise InputError(f"{flag}: fp8_inc is Intel Gaudi's (HPU) fp8 cache; no vLLM cache "
                         f"kernel on {hw.id} takes it (CUDA, ROCm: fp8 = fp8_e4m3); use "
                         "--kv-cache-dtype fp8")
    if p.name != "fp8_e5m2":
        return
    if arch.startswith("cdna"):
        raise InputError(f"{flag}: vLLM's ROCm cache kernels write fp8 as e4m3 only, so "
                         f"{hw.id} cannot hold an e5m2 cache; use --kv-cache-dtype fp8")
    if arch.startswith("hopper") and model.mla is None:
        raise InputError(f"{flag}: on {hw.id} vLLM runs FlashAttention 3, whose fp8 KV cache "
                         "is e4m3 only (\"Unrecognized FP8 dtype: fp8_e5m2\"); use "
                         "--kv-cache-dtype fp8")


def _check_ampere_fp8(model: ModelSpec, hw: HardwareSpec, p: KvPrecision, flag: str) -> None:
    """vLLM 0.11 runs an fp8 KV cache on an SM 8.x GPU other than Hopper with TRITON_ATTN
    (platforms/cuda.py: ``(has_sink or use_fp8_kv_cache) and not is_device_capability(90)``),
    which views every fp8 cache (e5m2 too) as ``current_platform.fp8_dtype()``, e4m3fn: its
    Triton cache write needs fp8e4nv, which has no lowering before SM 8.9 (Ada), so on Ampere
    the engine fails to start ("type fp8e4nv not supported in this architecture", vllm
    #26431, #54219; a later vLLM refuses fp8 below SM89 outright, #43914, and #50882 is still
    to make e5m2 run there). An MLA model is refused by its own backend's rule (Triton MLA)."""
    if p.value_bits != 8 or not p.name.startswith("fp8") or model.mla is not None:
        return
    if hw.arch.lower().startswith("ampere"):
        raise InputError(f"{flag}: on {hw.id} ({hw.arch}) vLLM runs Triton attention for an "
                         "fp8 cache and stores it as e4m3 (Triton's fp8e4nv), which it cannot "
                         "compile before SM 8.9: \"type fp8e4nv not supported in this "
                         "architecture\" (vllm #26431); use --kv-cache-dtype auto, or an Ada, "
                         "Hopper or Blackwell GPU")


def mla_stores(p: KvPrecision) -> bool:
    """Whether some vLLM MLA backend keeps its latent cache in ``p``: 16 bits or per-tensor
    fp8 e4m3 (no per-token-head scales, no 4-bit values, no e5m2: FlashMLA lists auto, fp8,
    fp8_e4m3 and its fp8 kernel reads e4m3; CUTLASS MLA auto, bfloat16, fp8, fp8_e4m3)."""
    return not p.scale_bytes and p.value_bits >= 8 and p.name != "fp8_e5m2"


def _mla_refusal(flag: str, p: KvPrecision) -> str:
    return (f"{flag}: no vLLM MLA backend stores the latent cache as {p.name} (MLA takes "
            "auto, bfloat16 or fp8); use --kv-cache-dtype fp8 or auto")


def check_mla_latent(kv: ModelKv) -> None:
    """The GPU-independent half of ``check_kv_dtype``, for ``kv``, ``request`` and ``batch``
    (no --gpu): refuse an MLA latent in a format no vLLM MLA backend stores, as capacity
    does and as the lever table leaves out (``mla_stores``)."""
    from kvplan.specs.kv import MLASpec

    p = kv.precision
    flag = f"--kv-cache-dtype {p.name}"
    _check_fp4_heads(p, (h for g in kv.groups for h in (getattr(g.spec, "head_size", 0),
                                                        getattr(g.spec, "head_size_v", 0)) if h),
                     flag)
    if p.name == FP8_DS_MLA.name or mla_stores(p):
        return
    if any(isinstance(g.spec, MLASpec) for g in kv.groups):
        raise InputError(_mla_refusal(flag, p))


NVFP4_GROUP = 16
"""Values sharing one fp8 scale in vLLM's nvfp4 cache; a head must be a whole number of them."""
NVFP4_MAX_HEAD = 256
"""Widest head vLLM's nvfp4 cache write packs (at most 32 int32 words of fp4 values)."""


def fp4_head_problem(p: KvPrecision, head_sizes: Iterable[int]) -> str | None:
    """Why vLLM's nvfp4 cache cannot hold heads of these sizes (None: it can, or ``p`` is
    another format). vLLM packs a head as head // 2 fp4 bytes + head // 16 fp8 scales
    (``nvfp4_kv_cache_full_dim``: no room for a partial group) and its cache write refuses
    the rest: "NVFP4 KV cache requires head_size to be a multiple of 16." / "<= 256"
    (csrc/cache_kernels.cu, ``reshape_and_cache_flash``; TRTLLM's builder says the same)."""
    if p.name != "nvfp4":
        return None
    for h in sorted(set(head_sizes)):
        if h % NVFP4_GROUP:
            return (f"head size {h} is not a multiple of {NVFP4_GROUP} (vLLM: \"NVFP4 KV "
                    f"cache requires head_size to be a multiple of {NVFP4_GROUP}\")")
        if h > NVFP4_MAX_HEAD:
            return (f"head size {h} is above {NVFP4_MAX_HEAD} (vLLM: \"NVFP4 KV cache "
                    f"requires head_size <= {NVFP4_MAX_HEAD}\")")
    return None


def _check_fp4_heads(p: KvPrecision, head_sizes: Iterable[int], flag: str) -> None:
    problem = fp4_head_problem(p, head_sizes)
    if problem is not None:
        raise InputError(f"{flag}: vLLM's nvfp4 cache packs each head in groups of "
                         f"{NVFP4_GROUP} values; this model's {problem}; use "
                         "--kv-cache-dtype fp8 or auto")
