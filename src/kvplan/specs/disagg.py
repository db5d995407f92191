"""DisaggDeployment: a prefill pool and a decode pool of one model, joined by a KV link."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.errors import InputError
from kvplan.specs.deployment import Deployment
from kvplan.specs.links import LinkSpec
from kvplan.specs.model import ModelSpec

DISAGG_ROUTERS = ("round-robin", "least-outstanding")
GPUS_PER_NODE = 8
"""HGX/DGX nodes hold 8 GPUs: a 'node'-scope link (NVLink, PCIe) joins GPUs of one node."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DisaggDeployment:
    """x prefill instances and y decode instances (each pool a Deployment: its GPU, engine
    flags and instance count as ``replicas``), a proxy routing round robin, and a link."""

    prefill: Deployment
    decode: Deployment
    link: LinkSpec
    router: str = "round-robin"
    """The proxy's choice on each side: 'round-robin' (vLLM's example proxy) or
    'least-outstanding' (fewest requests sent and not yet done)."""

    def __post_init__(self) -> None:
        if self.router not in DISAGG_ROUTERS:
            raise InputError(f"--router {self.router!r}: a disaggregated proxy routes "
                             f"{' or '.join(DISAGG_ROUTERS)}")
        if self.prefill.model.name != self.decode.model.name:
            raise InputError(f"the prefill pool serves {self.prefill.model.name} and the "
                             f"decode pool {self.decode.model.name}; both must serve one model")
        tp_p = self.prefill.engine.tensor_parallel_size
        tp_d = self.decode.engine.tensor_parallel_size
        if tp_d % tp_p:
            # vLLM's NixlConnector: tp_ratio = divide(decode TP, prefill TP), asserted > 0
            # ("Decode TP cannot be smaller than prefill TP"); each decode GPU reads its
            # heads from one prefill GPU
            fits = ", ".join(str(tp_p * k) for k in (1, 2, 4) if tp_p * k <= 64)
            raise InputError(f"--decode-tp {tp_d} must be a multiple of --prefill-tp {tp_p} "
                             f"(vLLM's NixlConnector reads each decode GPU's heads from one "
                             f"prefill GPU); e.g. --decode-tp {fits}")
        _check_replicated_heads(self.prefill.model, tp_p, tp_d)
        _check_no_pp(self.prefill, self.decode)
        if self.link.scope == "node" and self.total_gpus > GPUS_PER_NODE:
            raise InputError(
                f"--kv-link {self.link.id} joins GPUs of one node ({GPUS_PER_NODE} GPUs) but "
                f"{self.label} needs {self.total_gpus}; use a network link (ib-ndr, ib-xdr, "
                f"roce-400g, eth-200g, eth-100g) or at most {GPUS_PER_NODE} GPUs in all")
        _check_link_gpus(self.link, self.prefill.gpu.id, self.decode.gpu.id)

    @property
    def label(self) -> str:
        """The xPyD name (1P1D, 2P4D, ...)."""
        return f"{self.prefill.replicas}P{self.decode.replicas}D"

    @property
    def total_gpus(self) -> int:
        return self.prefill.total_gpus + self.decode.total_gpus

    def link_rate(self, link: LinkSpec | None = None) -> float:
        """The slower pool GPU's bytes/s over ``link`` (default: the fleet's): the link's
        rate, capped by each GPU's PCIe where the link crosses it (an L40S's Gen4 x16
        carries 31.5e9 B/s a direction, not InfiniBand NDR's 50e9)."""
        return min(self.side_rates(link))

    def side_rates(self, link: LinkSpec | None = None) -> tuple[float, float]:
        """(a prefill GPU's, a decode GPU's) bytes/s over ``link``: each GPU's NIC moves at
        the link's rate capped by that GPU's own PCIe (H100 prefill to A100 decode over
        ib-ndr: 50e9 sent, 31.5e9 received per GPU)."""
        link = link or self.link
        return (link.rate_on(self.prefill.gpu.pcie_bytes_per_s),
                link.rate_on(self.decode.gpu.pcie_bytes_per_s))

    def transfer_bytes_per_s(self, link: LinkSpec | None = None) -> float:
        """One request's KV rate over ``link``: the prefill GPUs' NICs together or the
        decode GPUs' together, the slower (``TransferCost.link_bytes_per_s``)."""
        rate_p, rate_d = self.side_rates(link)
        return min(self.prefill.engine.tensor_parallel_size * rate_p,
                   self.decode.engine.tensor_parallel_size * rate_d)


def link_usable(link: LinkSpec, gpu_ids: tuple[str, ...], total_gpus: int) -> bool:
    """Whether ``link`` can join a fleet of ``total_gpus`` GPUs of these ids: a node link
    within one node, and every GPU one the link joins at its rate (``LinkSpec.gpus``)."""
    return ((link.scope == "network" or total_gpus <= GPUS_PER_NODE)
            and all(link.joins(g) for g in gpu_ids))


def _check_link_gpus(link: LinkSpec, *gpu_ids: str) -> None:
    """A link that only some GPUs have (NVLink 4, a PCIe Gen5 host link) is refused on the
    others: its bandwidth would be a figure the GPU cannot reach (450 GB/s on an L40S)."""
    from kvplan.specs.links import link_catalog

    bad = sorted({g for g in gpu_ids if not link.joins(g)})
    if bad:
        ok = [x.id for x in link_catalog() if all(x.joins(g) for g in gpu_ids)]
        raise InputError(
            f"--kv-link {link.id} does not join {', '.join(bad)} (it joins only "
            f"{', '.join(link.gpus)}); use one of {', '.join(ok)}")


def _check_replicated_heads(model: ModelSpec, tp_p: int, tp_d: int) -> None:
    """vLLM 0.11's NixlConnector (``add_remote_agent``) pairs a decode GPU's KV heads with a
    slice of one prefill GPU's: with KV heads H, a prefill TP below H shards them, and then
    the prefill block must be ``tp_d / tp_p`` decode blocks, which fails once a decode TP
    above H replicates its single head (the assert "Remote P worker KV layer cache must be
    of shape [2, N, local_kv_heads*tp_ratio, ...]"). MLA's latent is on every GPU: any pair."""
    heads = model.num_kv_heads
    if model.mla is not None or not tp_p < heads < tp_d:
        return
    fits = sorted({t for t in (heads, tp_d) if t >= heads and tp_d % t == 0})
    raise InputError(
        f"--decode-tp {tp_d} with --prefill-tp {tp_p}: {model.name}'s {heads} KV heads are "
        f"split over the prefill GPUs but replicated on the decode GPUs, which vLLM's "
        f"NixlConnector cannot pair (add_remote_agent asserts); give --decode-tp <= {heads}, "
        f"or --prefill-tp {' or '.join(map(str, fits))}")


def _check_no_pp(prefill: Deployment, decode: Deployment) -> None:
    """Pipeline stages are not modelled in a fleet: the link moves one TP shard of every
    layer per GPU (docs/disaggregation.md), so a PP pool would move only its first stage's
    layers and count too few NICs."""
    for role, d in (("prefill", prefill), ("decode", decode)):
        pp = d.engine.pipeline_parallel_size
        if pp > 1:
            raise InputError(
                f"--pipeline-parallel-size {pp}: a disaggregated fleet's {role} pool is "
                f"modelled with tensor parallelism only (the KV transfer moves one TP shard "
                f"of every layer per GPU; pipeline stages are not modelled); drop -pp and "
                f"give --prefill-tp / --decode-tp, or simulate without --disagg")


def pool_label(d: Deployment) -> str:
    """TP8, or DP2 x TP8 EP for a data-parallel (expert-parallel) instance."""
    e = d.engine
    dp = e.data_parallel_size
    ep = (e.enable_expert_parallel and d.model.moe is not None
          and e.tensor_parallel_size * dp > 1)  # ep_layout.parallel_layout's rule
    return (f"DP{dp} x " if dp > 1 else "") + f"TP{e.tensor_parallel_size}" + (
        " EP" if ep else "")


def pool_flags(text: str, role: str) -> str:
    """An engine message's flags as the pool's own (--tensor-parallel-size -> --decode-tp)."""
    return (text.replace("--tensor-parallel-size", f"--{role}-tp")
            .replace("--data-parallel-size", f"--{role}-dp"))


def kv_transfer_model(model: ModelSpec, flag: str = "--kv-transfer-config") -> ModelSpec:
    """The model as vLLM lays out its KV cache without its hybrid KV cache manager.

    vLLM 0.11 (config/vllm.py) disables that manager with a KV connector
    (``--kv-transfer-config``), with ``--kv-events-config`` and with
    ``--disable-hybrid-kv-cache-manager`` (``flag``: the one given); ``unify_hybrid_kv_cache_
    specs`` then turns sliding-window layers into full attention when full-attention layers
    exist (attention itself stays windowed: only the cache grows). State layers (Mamba,
    linear attention) beside attention cannot be unified: vLLM refuses to start ("failed to
    convert the KV cache specs to one unified type"), and so does kvplan.
    """
    kinds = set(model.layer_kinds)
    cached = kinds & {"full", "sliding", "mla"}
    if cached and kinds & {"mamba", "linear_attention"}:
        serve = "serve it aggregated" if flag == "--kv-transfer-config" else f"drop {flag}"
        raise InputError(
            f"{model.name} mixes attention and state layers: vLLM 0.11 disables its hybrid "
            f"KV cache manager under {flag} and cannot unify them (it refuses to start); "
            f"{serve}")
    if "sliding" in kinds and "full" in kinds:
        return replace(model, layer_kinds=tuple("full" if k == "sliding" else k
                                                for k in model.layer_kinds))
    return model
