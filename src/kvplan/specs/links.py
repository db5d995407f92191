"""KV-transfer link catalog: bandwidth per GPU, latency and scope of each link, with sources."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from kvplan.errors import UnknownNameError

LINK_SCOPES = ("node", "network")
"""'node': prefill and decode GPUs must sit in one node; 'network': any two nodes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSpec:
    """One link between a prefill and a decode instance, as one GPU sees it."""

    id: str
    name: str
    bytes_per_s_per_gpu: float
    """One direction of one GPU's own link (decimal line rate)."""
    latency_s: float
    """Fixed cost added once to every transfer."""
    scope: str
    source: str
    gpus: tuple[str, ...] = ()
    """GPU ids the link can join (NVLink 4: the SXM H100 and H200; PCIe Gen5: GPUs with a
    Gen5 x16 host interface); () = any GPU (a network NIC)."""

    over_pcie: bool = True
    """The link reaches GPU memory over the GPU's PCIe x16 link (a NIC's GPUDirect RDMA, or
    host memory): no GPU moves faster than its PCIe (``rate_on``). NVLink: False."""

    def rate_on(self, *pcie_bytes_per_s: float) -> float:
        """One GPU's bytes/s on this link between GPUs of these PCIe x16 rates (both
        directions, as vendors quote them; 0 = unknown, not capped): the link's rate, or one
        direction of the slowest PCIe after 128b/130b coding (Gen4 64e9 -> 31.5e9)."""
        caps = [b / 2 * 128 / 130 for b in pcie_bytes_per_s if b > 0] if self.over_pcie else []
        return min([self.bytes_per_s_per_gpu, *caps])

    def joins(self, gpu_id: str) -> bool:
        """Whether a GPU of this id has this link at this rate."""
        return not self.gpus or gpu_id in self.gpus

    def __post_init__(self) -> None:
        if not self.bytes_per_s_per_gpu > 0 or not self.latency_s >= 0:
            raise ValueError(f"link {self.id}: bandwidth must be > 0 and latency >= 0")
        if self.scope not in LINK_SCOPES:
            raise ValueError(f"link {self.id}: scope {self.scope!r} not in {LINK_SCOPES}")


@cache
def link_catalog() -> tuple[LinkSpec, ...]:
    """Every bundled link (kvplan/data/links/links.json), in file order."""
    text = resources.files("kvplan").joinpath("data/links/links.json").read_text("utf-8")
    rows = json.loads(text)["links"]
    return tuple(LinkSpec(id=r["id"], name=r["name"],
                          bytes_per_s_per_gpu=float(r["bytes_per_s_per_gpu"]),
                          latency_s=float(r["latency_s"]), scope=r["scope"],
                          source=r["source"], gpus=tuple(r.get("gpus", ())),
                          over_pcie=bool(r.get("over_pcie", True)))
                 for r in rows)


def load_link(name: str) -> LinkSpec:
    """The catalog link called ``name`` (case-insensitive); UnknownNameError lists the ids."""
    key = name.strip().lower()
    for link in link_catalog():
        if link.id == key:
            return link
    ids = ", ".join(x.id for x in link_catalog())
    raise UnknownNameError(f"--kv-link {name!r} is not a known link; choose one of {ids}")
