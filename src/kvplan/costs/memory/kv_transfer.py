"""KV transfer arithmetic between a prefill and a decode instance: bytes moved and wire time.

One request with P prompt tokens moves the pages its decode instance allocates for them,
every decode GPU receiving its own TP shard (so a TP change between the pools reshards)::

    rank_bytes(P)  = sum over KV groups: layers x pages(P) x page_bytes   (one decode GPU)
                     pages(P) = cdiv(P, B) for every attention group, a sliding window's
                     too; 1 state page (bytes: state_bytes) for a state group

A sliding window moves every page: the decode instance allocates cdiv(P, B) blocks for the
whole prompt before the transfer (its window frees the older ones only at its next step),
and vLLM's NixlConnector reads every allocated block of every layer (``_read_blocks``), but
Llama 4's chunked local layers (cached as full attention): of those it reads the last
``cdiv(attention_chunk_size, B)`` blocks only (``block_window_per_layer``), so such a
layer moves min(pages(P), cdiv(chunk, B)) pages.
    link_bytes(P)  = decode_tp x rank_bytes(P)                          (all decode GPUs)
    wire_s(P)      = max(link_bytes / prefill_tp / bw_p, rank_bytes / bw_d)
                   = link_bytes / min(prefill_tp x bw_p, decode_tp x bw_d)

Every prefill GPU sends an equal share of what the decode GPUs read, over its own NIC at
its rate bw_p; every decode GPU receives its shard at its rate bw_d (each the link's rate
capped by that GPU's PCIe); the slower side binds. Worked example: docs/disaggregation.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.specs.kv import SlidingWindowSpec
from kvplan.specs.kv_state import StateSpec

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPages:
    """One KV cache group as the transfer sees it: real layers, page geometry, window."""

    layers: int
    block_size: int
    page_bytes: int
    window: int = 0
    """Sliding window in tokens; 0 = every token kept. The transfer moves every page of the
    prompt either way (module docstring)."""
    state_bytes: int = 0
    """Per-layer bytes of a state group (one page per request); 0 for attention."""
    clipped_layers: int = 0
    """Of ``layers``, those NixlConnector reads only the last ``clip_pages`` pages of
    (Llama 4's chunked local layers, module docstring)."""
    clip_pages: int = 0


def group_pages(groups: Sequence[Any], chunk_tokens: int = 0,
                chunked: Sequence[int] = ()) -> tuple[GroupPages, ...]:
    """GroupPages of a MemoryPlan's groups (``.spec``, ``.layer_ids``, ``.block_size``);
    ``chunked``: the model's chunked local layers, each read as its last
    cdiv(``chunk_tokens``, block) pages (``ModelSpec.chunked_local_layers``)."""
    out = []
    for g in groups:
        layers = sum(1 for x in g.layer_ids if x is not None)
        clipped = sum(1 for x in g.layer_ids if x is not None and x in chunked) \
            if chunk_tokens else 0
        spec = g.spec
        if isinstance(spec, StateSpec):
            out.append(GroupPages(layers=layers, block_size=g.block_size, page_bytes=0,
                                  state_bytes=spec.state_bytes))
            continue
        window = spec.window if isinstance(spec, SlidingWindowSpec) else 0
        out.append(GroupPages(layers=layers, block_size=g.block_size,
                              page_bytes=spec.page_size_bytes(g.block_size), window=window,
                              clipped_layers=clipped,
                              clip_pages=-(-chunk_tokens // g.block_size) if clipped else 0))
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class TransferCost:
    """Bytes and wire seconds of one request's KV between two instances of given TP."""

    groups: tuple[GroupPages, ...]
    """The decode instance's groups (its TP shard, the pages it allocates)."""
    prefill_tp: int
    decode_tp: int
    bytes_per_s_per_gpu: float
    """A prefill GPU's send rate (and a decode GPU's, unless ``decode_bytes_per_s_per_gpu``)."""
    latency_s: float
    decode_bytes_per_s_per_gpu: float = 0.0
    """A decode GPU's receive rate; 0 = ``bytes_per_s_per_gpu`` (GPUs of one PCIe rate)."""

    def rank_bytes(self, prompt_tokens: IntArray) -> IntArray:
        """Bytes one decode GPU receives for each prompt length."""
        t = np.asarray(prompt_tokens, dtype=np.int64)
        total = np.zeros_like(t)
        for g in self.groups:
            if g.state_bytes:
                total += g.layers * g.state_bytes * (t > 0)
                continue
            pages = -(-t // g.block_size)  # every block the decode side allocated
            whole = g.layers - g.clipped_layers
            total += g.page_bytes * (whole * pages
                                     + g.clipped_layers * np.minimum(pages, g.clip_pages))
        return total

    def link_bytes(self, prompt_tokens: IntArray) -> IntArray:
        """Bytes all decode GPUs receive together (what crosses the link)."""
        return self.decode_tp * self.rank_bytes(prompt_tokens)

    def wire_s(self, link_bytes: float) -> float:
        """Seconds the link is busy moving ``link_bytes`` (latency not included)."""
        return link_bytes / self.link_bytes_per_s

    def wire_s_each(self, link_bytes: IntArray) -> FloatArray:
        """``wire_s`` of each element, with its float operations (one division each)."""
        return np.asarray(link_bytes, dtype=np.float64) / self.link_bytes_per_s

    @property
    def link_bytes_per_s(self) -> float:
        """The transfer's bandwidth: each side's GPUs together, each at its NIC's rate (its
        PCIe's cap); the slower side binds."""
        decode = self.decode_bytes_per_s_per_gpu or self.bytes_per_s_per_gpu
        return min(self.prefill_tp * self.bytes_per_s_per_gpu, self.decode_tp * decode)

    def transfer_s(self, link_bytes: float) -> float:
        """Wire time plus the link's fixed latency: one transfer on an idle link."""
        return self.wire_s(link_bytes) + self.latency_s
