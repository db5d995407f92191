"""What an older vLLM release ran differently from the release kvplan's kernel tables measured
(vLLM 0.24 on Hopper and Blackwell): read from a measurement's printed engine version.

One difference is priced so far. Before vLLM 0.12, gpt-oss's MXFP4 experts ran vLLM's Marlin
MoE kernel on Hopper: the faster Triton kernel (``matmul_ogs`` from OpenAI's
``triton_kernels``) was used only where that package was installed by hand, and vLLM shipped
it first in 0.12 (vLLM PR #27370, 2025-10-22: "users have to install triton_kernels manually
to access this code-path"; reverted for install problems, issue #27672; vendored by PR #28788,
merged 2025-11-18, after 0.11.1 was cut). ``vllm/model_executor/layers/quantization/mxfp4.py``
picks Triton when ``has_triton_kernels()``, else Marlin.
"""

from __future__ import annotations

import re

TRITON_KERNELS_SHIPPED = (0, 12)
"""The first vLLM release whose install carries ``triton_kernels`` (PR #28788)."""
_RELEASE = re.compile(r"v?(\d+)\.(\d+)")


def release(text: str | None) -> tuple[int, int] | None:
    """(major, minor) of a printed version such as ``v0.11.0`` or ``0.10.2 (image ...)``;
    None when the text names none (a commit, ``main``)."""
    found = _RELEASE.match((text or "").strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def mxfp4_moe_backend(engine: str, version: str | None, gpu: str) -> str:
    """'marlin' where that vLLM release ran gpt-oss's MXFP4 experts with Marlin (a Hopper GPU
    by its catalog ``arch``, before 0.12), else 'auto' (the measured tables' kernel)."""
    seen = release(version)
    old = seen is not None and seen < TRITON_KERNELS_SHIPPED
    is_vllm = engine.strip().lower() == "vllm"
    return "marlin" if is_vllm and old and _is_hopper(gpu) else "auto"


def _is_hopper(gpu: str) -> bool:
    from kvplan.specs.hardware import gpu_catalog

    spec = gpu_catalog().get(gpu.lower())
    return spec is not None and spec.arch.lower().startswith("hopper")
