"""The KV link's queues: FIFO per prefill instance's NICs and per decode instance's NICs.

A transfer holds its prefill instance's NICs and its decode instance's NICs for its whole
wire time; transfers queue in the order decode instances admit them (first come, first
served), so a transfer's times are known when it is admitted::

    start = max(admitted, prefill NICs free, decode NICs free)
    end   = start + wire_s(bytes) + latency_s      (the NICs are free again at start + wire)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.costs.memory.kv_transfer import TransferCost


@dataclass(slots=True)
class LinkQueues:
    """When each instance's NICs are free next, and the bytes moved so far."""

    cost: TransferCost
    prefill_instances: int
    decode_instances: int
    egress_free_s: list[float] = field(default_factory=list)
    ingress_free_s: list[float] = field(default_factory=list)
    moved_bytes: int = 0

    def __post_init__(self) -> None:
        self.egress_free_s = [0.0] * self.prefill_instances
        self.ingress_free_s = [0.0] * self.decode_instances

    def schedule(self, t: float, p: int, d: int, nbytes: int) -> tuple[float, float]:
        """(start, end) of a transfer of ``nbytes`` from prefill p to decode d admitted at t."""
        start = max(t, self.egress_free_s[p], self.ingress_free_s[d])
        free = start + self.cost.wire_s(nbytes)
        self.egress_free_s[p] = free
        self.ingress_free_s[d] = free
        self.moved_bytes += nbytes
        return start, free + self.cost.latency_s


NIXL_ABORT_REQUEST_TIMEOUT_S = 480.0
"""vLLM 0.11's VLLM_NIXL_ABORT_REQUEST_TIMEOUT default (envs.py): how long a prefill
instance keeps a finished request's blocks for a decode side that never reads them
(NixlConnector's request_finished sets the expiry; the worker frees them after it)."""


def refused_after_prefill(rejected: dict[int, str], prefill_reasons: dict[int, str]
                          ) -> frozenset[int]:
    """Requests refused by the decode side only: vLLM's proxy sends each to a prefill
    instance first (max_tokens=1), which computes it and holds its blocks; the decode
    instance then refuses it (prompt + output > max_model_len, a pool too small)."""
    return frozenset(r for r in rejected if r not in prefill_reasons)


def refusals(prefill: dict[int, str], decode: dict[int, str]) -> dict[int, str]:
    """Each refused request's reason from the side that refuses it: the proxy sends it to a
    prefill instance first (max_tokens=1: prompt + 1 tokens), whose refusal the client sees;
    only a request the prefill side accepts reaches the decode side (its full output)."""
    out = {i: f"decode side, after its prefill ran: {why}" for i, why in decode.items()
           if i not in prefill}
    out.update({i: f"prefill side (the proxy's max_tokens=1): {why}"
                for i, why in prefill.items()})
    return out
