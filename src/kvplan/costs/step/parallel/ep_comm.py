"""Seconds of the MoE token exchange under data / expert parallelism (dispatch + combine per
MoE layer) and of a tensor-parallel all-reduce that crosses nodes: latency + bytes / bandwidth.

vLLM 0.11 (``fused_moe/layer.py`` FusedMoE.forward_impl): with dp > 1 every MoE layer first
sends each DP rank's tokens to the GPUs holding their experts (dispatch) and brings the expert
outputs back (combine); the TP all-reduces inside a DP rank stay. Per GPU and MoE layer, for
T tokens on each DP rank (H hidden, k experts per token, 2-byte activations)::

    allgather_reducescatter (VLLM_ALL2ALL_BACKEND default): all-gather over the dp ranks, then
        reduce-scatter: each GPU receives  bytes = (dp - 1) x T x H x 2   in each of the two
    deepep_low_latency (and ``deepep``; DeepEP all-to-all, EP only): each GPU sends its
        T / tp tokens to k experts, of which (ep - 1) / ep live on other GPUs:
        bytes = ceil(T / tp) x k x (ep - 1) / ep x W, W = H x 2 (combine; dispatch of
        block-fp8 models: H + ceil(H / 128) x 4), and the busiest GPU moves ``imbalance`` x
    deepep_high_throughput (DeepEP's normal kernels): a token goes once to every other GPU
        holding one of its experts, and crosses the network once per other node holding
        one (then NVLink fans it out there); k experts placed uniformly at random over n
        GPUs (or nodes) reach  touched(n, k) = (n - 1) (1 - (1 - 1/n)^k)  others:
        NVLink bytes = ceil(T / tp) x touched(ep, k) x W, network bytes = ceil(T / tp) x
        touched(nodes, k) x W (group-limited routing, e.g. DeepSeek-V3's 4 of 8 groups,
        would cap the nodes further: not priced)
    seconds per layer = (latency + dispatch bytes / bandwidth) + (latency + combine bytes / bw)

``bandwidth`` is one direction of the GPU's scale-up link (NVLink) within a node; traffic to
other nodes goes over the catalog's per-GPU scale-out link (``HardwareSpec``), and the slower
of the two shares sets the time. See docs/parallelism.md for a worked example.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvplan.costs.step.batch import FloatArray, IntArray
from kvplan.errors import InputError
from kvplan.specs.serving import ALL2ALL_BACKENDS

A2A_BACKENDS = ALL2ALL_BACKENDS
DEEPEP = ("deepep_high_throughput", "deepep_low_latency", "deepep")
"""The DeepEP backends (EP only; the experts see only their routed rows)."""
DEFAULT_A2A_BACKEND = "allgather_reducescatter"
"""vLLM 0.11's ``VLLM_ALL2ALL_BACKEND`` default (``vllm/envs.py``)."""
DEFAULT_IMBALANCE = 59_337 / 50_302
"""Busiest GPU over the mean under EP: SGLang's DeepSeek-V3 prefill on 4 x 8 H100 (EP32)
ran 50,302 tokens/s per node with its default expert placement and 59,337 with simulated
perfect balance (LMSYS blog "Deploying DeepSeek with PD Disaggregation and Large-scale Expert
Parallelism on 96 H100 GPUs", 2025-05-05, Overall Throughput table): 1.180x."""
ACT_BYTES = 2
"""Dispatch and combine move bf16 activations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """Where one GPU's collective traffic goes: its node and the links in and out of it."""

    node_gpus: int
    scale_up_bytes_per_s: float
    """One direction of the GPU's NVLink (or PCIe) bandwidth, after comm efficiency."""
    scale_out_bytes_per_s: float
    """One direction of the GPU's inter-node link (0: unknown, single node only)."""
    latency_s: float
    """Fixed seconds of one collective (the profile's all-reduce latency)."""

    def seconds(self, nbytes: FloatArray, group: int, per_node: int) -> FloatArray:
        """One collective moving ``nbytes`` per GPU among ``group`` GPUs, ``per_node`` of them
        in each node: the share bound for other nodes, (group - per_node) / (group - 1),
        crosses the scale-out link, the rest stays on NVLink; the slower share sets the time."""
        if group <= per_node:
            return self.latency_s + nbytes / self.scale_up_bytes_per_s
        off = (group - per_node) / (group - 1)
        return self.latency_s + np.maximum(nbytes * (1.0 - off) / self.scale_up_bytes_per_s,
                                           nbytes * off / self.scale_out_bytes_per_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeExchange:
    """Dispatch + combine of every MoE layer of one step on the busiest GPU."""

    layers: int
    backend: str
    hidden: int
    topk: int
    tp: int
    dp: int
    ep: int
    imbalance: float
    link: Link
    dispatch_token_bytes: int = 0
    """Bytes of one token's activations in a dispatch (0: bf16, 2 H). DeepEP sends
    block-fp8 models' tokens quantized: H + ceil(H / 128) x 4 (fp8 values, fp32 scales)."""

    def __post_init__(self) -> None:
        if self.backend not in A2A_BACKENDS:
            raise InputError(f"--all2all-backend {self.backend!r}: choose one of "
                             f"{', '.join(A2A_BACKENDS)}")
        if self.backend in DEEPEP and self.ep == 1:
            raise InputError(f"--all2all-backend {self.backend} needs --enable-expert-parallel "
                             "(vLLM uses its all-to-all kernels only under EP)")

    def bytes_per_layer(self, tokens: IntArray, *, dispatch: bool = False) -> IntArray:
        """Bytes the busiest GPU moves in one combine (``dispatch``: in one dispatch), before
        imbalance, for ``tokens`` tokens on each DP rank."""
        t = np.asarray(tokens, dtype=np.int64)
        width = self.hidden * ACT_BYTES
        if dispatch and self.dispatch_token_bytes:
            width = self.dispatch_token_bytes
        if self.backend == "allgather_reducescatter":
            return (self.dp - 1) * t * width
        per_gpu = -(-t // self.tp)
        if self.backend == "deepep_high_throughput":
            out: IntArray = np.floor(per_gpu * width * touched(self.ep, self.topk)).astype(
                np.int64)
            return out
        return per_gpu * self.topk * (self.ep - 1) * width // self.ep

    def seconds(self, tokens: IntArray) -> FloatArray:
        """Seconds of the step's dispatches and combines (one each per MoE layer)."""
        total = self.layer_seconds(tokens, dispatch=True) + self.layer_seconds(tokens)
        return self.layers * total

    def layer_seconds(self, tokens: IntArray, *, dispatch: bool = False) -> FloatArray:
        """Seconds of one MoE layer's combine (``dispatch``: its dispatch) of ``tokens``
        tokens on each DP rank, on the busiest GPU."""
        if self.backend == "allgather_reducescatter":  # the dp GPUs of one TP index
            group, per_node = self.dp, max(1, self.link.node_gpus // self.tp)
        else:
            group, per_node = self.ep, self.link.node_gpus
        nbytes = self.bytes_per_layer(tokens, dispatch=dispatch).astype(np.float64)
        if self.backend in DEEPEP:
            nbytes = nbytes * self.imbalance
        if self.backend == "deepep_high_throughput" and group > per_node:
            return self._deduped_s(nbytes, group, per_node)
        out: FloatArray = self.link.seconds(nbytes, group, per_node)
        return out

    def _deduped_s(self, nvlink_bytes: FloatArray, group: int, per_node: int) -> FloatArray:
        """DeepEP normal kernels across nodes: every touched GPU's copy over NVLink, one
        copy per touched node over the network; the slower of the two sets the time."""
        nodes = -(-group // per_node)
        network = nvlink_bytes * touched(nodes, self.topk) / touched(group, self.topk)
        link = self.link
        return link.latency_s + np.maximum(nvlink_bytes / link.scale_up_bytes_per_s,
                                           network / link.scale_out_bytes_per_s)


def touched(n: int, k: int) -> float:
    """Expected others among ``n`` GPUs (or nodes), self included in n, that hold at least
    one of a token's ``k`` experts when experts sit uniformly at random: (n-1)(1-(1-1/n)^k)."""
    return (n - 1) * (1.0 - (1.0 - 1.0 / n) ** k) if n > 1 else 0.0


def cross_node_allreduce_s(message_bytes: FloatArray, tp: int, link: Link) -> FloatArray:
    """A ring all-reduce over ``tp`` GPUs spanning nodes: 2 (tp - 1) / tp of the message
    crosses each GPU's link; the ring is as slow as its scale-out hop."""
    ring = 2.0 * (tp - 1) / tp * message_bytes
    return link.latency_s + ring / link.scale_out_bytes_per_s


@dataclass(frozen=True, slots=True, kw_only=True)
class DboOverlap:
    """How a step's two micro-batches overlap their exchange with compute."""

    threshold: int
    """Steps of more tokens than this are micro-batched."""
    comm_share: float
    """Share of the GPU's SMs the exchange holds while it runs (0: none)."""
