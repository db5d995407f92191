"""Dual batch overlap (vLLM ``--enable-dbo``; SGLang's two-batch overlap): a step's tokens
split into two micro-batches whose MoE token exchange runs under the other's compute.

vLLM's schedule (docs/design/dbo.md, ``mlp_overlap``), per MoE layer, micro-batches 0 and 1
of ceil(T / 2) and floor(T / 2) tokens::

    compute  | A(0)  | E(1)  | E(0)  | A(1)  |      A: the layer's other GEMMs (attention
    exchange | D(1)  | D(0)  | C(1)  | C(0)  |         projections, router, shared experts)
                                                    E: routed experts, D / C: dispatch / combine

Each phase lasts as long as its slower side. DeepEP's normal kernels
(``deepep_high_throughput``) run on ``DEEPEP_SMS`` of the GPU's SMs while they move data, so
compute beside them runs on the rest: a phase of compute c beside an exchange x lasts
``max(x, c + x * comm_share)`` (compute advances at 1 - comm_share while x runs, at full
rate after). DeepEP's low-latency kernels receive through a hook and hold no SMs
(comm_share 0). The attention kernels (priced from the step's sums, outside these per-token
tables) stay serial: an upper bound, since vLLM's A phase includes them. Layers without
experts run both micro-batches one after the other.

vLLM micro-batches a decode-only step above ``--dbo-decode-token-threshold`` tokens (32) and
a step with a prefill above ``--dbo-prefill-token-threshold`` (512). The per-token tables
cannot tell the two apart: kvplan uses the decode threshold for steps up to the prefill
threshold, exact for decode-only steps, and overlaps mixed steps of 33-512 tokens that vLLM
runs whole (docs/parallelism.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kvplan.costs.step.parallel.ep_comm import DboOverlap
from kvplan.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable

    from kvplan.costs.step.batch import FloatArray, IntArray
    from kvplan.costs.step.ops import StageOps
    from kvplan.specs.hardware import HardwareSpec
    from kvplan.specs.serving import EngineConfig

DEEPEP_SMS = 20
"""SMs DeepEP's normal kernels use: vLLM's DeepEP all-to-all managers set num_sms = 20
("the DeepEP default", vllm/distributed/device_communicators/all2all.py; DeepEP's
deep_ep/buffer.py Buffer.num_sms = 20)."""
GPU_SMS = {"A100-40GB-SXM": 108, "A100-80GB-SXM": 108, "H100-SXM-80GB": 132,
           "H100-PCIe-80GB": 114, "H800-SXM-80GB": 132, "H200-SXM-141GB": 132,
           "B200-SXM-180GB": 148}
"""Streaming multiprocessors per GPU (NVIDIA's A100 and H100 architecture whitepapers:
A100 108, H100 SXM5 132, H100 PCIe 114; H200 and H800 are the same GH100 configuration as H100 SXM;
B200: 148, NVIDIA Blackwell architecture technical brief)."""
_MLP_ONLY = ("gate_up_proj", "up_proj", "down_proj")
"""GEMMs of the dense MLP: only in layers without experts."""


def dbo_overlap(engine: EngineConfig, hw: HardwareSpec) -> DboOverlap | None:
    """The deployment's overlap (None without ``--enable-dbo``); vLLM's rules refused."""
    if not engine.enable_dbo:
        return None
    if engine.data_parallel_size < 2 or not engine.enable_expert_parallel:
        raise InputError("--enable-dbo needs --data-parallel-size > 1 and "
                         "--enable-expert-parallel (vLLM runs DBO for DP + EP only)")
    backend = engine.all2all_backend
    if not backend.startswith("deepep"):
        raise InputError("--enable-dbo needs a DeepEP exchange (vLLM's rule): add "
                         "--all2all-backend deepep_low_latency or deepep_high_throughput")
    share = 0.0
    if backend == "deepep_high_throughput":
        sms = GPU_SMS.get(hw.id)
        if sms is None:
            raise InputError(f"--enable-dbo with deepep_high_throughput: kvplan does not know "
                             f"{hw.id}'s SM count; use deepep_low_latency or one of "
                             f"{', '.join(sorted(GPU_SMS))}")
        share = DEEPEP_SMS / sms
    return DboOverlap(threshold=engine.dbo_decode_token_threshold, comm_share=share)


def overlapped_s(ops: StageOps, m: IntArray, real: IntArray,
                 line: Callable[[int, int, str, IntArray], FloatArray],
                 experts: Callable[[IntArray], FloatArray]) -> FloatArray:
    """GEMMs + experts + exchange of steps of ``real`` tokens (``m``: padded to the CUDA
    graph's size) under DBO, seconds. ``line(n, k, name, rows)``: one GEMM's seconds;
    ``experts(tokens)``: one MoE layer's routed experts (priced at the real tokens)."""
    assert ops.moe is not None and ops.exchange is not None and ops.overlap is not None
    u0, u1 = -(-m // 2), m // 2
    moe_layers, share = ops.moe.count, ops.overlap.comm_share
    a0 = np.zeros(len(m), dtype=np.float64)
    a1, dense = a0.copy(), a0.copy()
    for op in ops.gemms:
        if op.per != "token":
            continue
        in_moe = _moe_layer_count(op.name, op.count, moe_layers, ops.layers)
        t0, t1 = line(op.n, op.k, op.name, u0), line(op.n, op.k, op.name, u1)
        a0, a1 = a0 + in_moe / moe_layers * t0, a1 + in_moe / moe_layers * t1
        dense = dense + (op.count - in_moe) * (t0 + t1)
    e0, e1 = experts(-(-real // 2)), experts(real // 2)
    x = ops.exchange
    d0, d1 = x.layer_seconds(u0, dispatch=True), x.layer_seconds(u1, dispatch=True)
    c0, c1 = x.layer_seconds(u0), x.layer_seconds(u1)
    layer = (_phase(a0, d1, share) + _phase(e1, d0, share) + _phase(e0, c1, share)
             + _phase(a1, c0, share))
    out: FloatArray = moe_layers * layer + dense
    return out


def _phase(compute: FloatArray, comm: FloatArray, share: float) -> FloatArray:
    """One phase: compute beside an exchange holding ``share`` of the SMs while it runs."""
    out: FloatArray = np.maximum(comm, compute + comm * share)
    return out


def _moe_layer_count(name: str, count: int, moe_layers: int, layers: int) -> float:
    """How many of a GEMM's ``count`` layers have experts: the dense MLP's none, the router's
    and shared experts' all, the attention projections' (one per layer) their share."""
    if name in _MLP_ONLY:
        return 0.0
    if name == "router" or name.startswith("shared_"):
        return float(count)
    return count * moe_layers / layers
