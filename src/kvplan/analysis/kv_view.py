"""The `kvplan kv` answer: a model's cache per token, whole model and per GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.specs.catalog import load_model
from kvplan.specs.kv import ModelKv, kv_spec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class KvReport:
    """Bytes per token for the whole model (tp=1) and for one GPU at the requested TP."""

    model: ModelSpec
    whole: ModelKv
    per_gpu: ModelKv
    block_size: int

    @property
    def risk(self) -> str:
        """The precision's risk line; a hybrid model's fixed state is not in that precision
        (it keeps --mamba-cache-dtype), so a smaller cache dtype shrinks only its attention
        layers, and the line says so with the per-GPU figures."""
        p, kv = self.per_gpu.precision, self.per_gpu
        state = kv.state_bytes_per_request
        if not state or p.value_bits >= 16:
            return p.risk
        from kvplan.units import fmt_bytes

        attn = sum(g.num_layers for g in kv.groups if g.bytes_per_token)
        fixed = sum(g.num_layers for g in kv.groups if not g.bytes_per_token)
        head = p.risk.replace("Halves the cache.", "Halves the attention layers' KV.")
        return (f"{head} Only the {attn} attention layers' KV ({fmt_bytes(kv.bytes_per_token)}"
                f"/token here) is stored in {p.name}: the {fixed} state layers' "
                f"{fmt_bytes(state)} per request keep --mamba-cache-dtype.")

    def to_json(self) -> dict[str, Any]:
        """JSON keys other tools read: bytes_per_token, bytes_per_token_per_gpu, groups."""
        return {
            "model": self.model.name,
            "attention": self.model.attention_kind,
            "kv_cache_dtype": self.per_gpu.precision.name,
            "precision_risk": self.risk,
            "tensor_parallel_size": self.per_gpu.tensor_parallel_size,
            "block_size": self.block_size,
            "bytes_per_token": self.whole.bytes_per_token,
            "bytes_per_token_per_gpu": self.per_gpu.bytes_per_token,
            "state_bytes_per_request": self.whole.state_bytes_per_request,
            "state_bytes_per_request_per_gpu": self.per_gpu.state_bytes_per_request,
            "groups": [_group_json(g, self.block_size) for g in self.per_gpu.groups],
            "notes": list(self.model.notes),
        }


def _group_json(group: Any, block_size: int) -> dict[str, Any]:
    spec = group.spec
    out: dict[str, Any] = {
        "kind": spec.kind,
        "label": spec.label,
        "num_layers": group.num_layers,
        "layer_ids": list(group.layer_ids),
    }
    for key in (
        "num_kv_heads",
        "head_size",
        "head_size_v",
        "window",
        "latent_dim",
        "state_elements",
    ):
        if hasattr(spec, key):
            out[key] = getattr(spec, key)
    out["bytes_per_token_per_layer"] = spec.bytes_per_token
    out["bytes_per_token"] = group.bytes_per_token
    out["state_bytes_per_request"] = group.state_bytes
    out["page_size_bytes"] = spec.page_size_bytes(block_size)
    return out


def kv_report(
    model: str | ModelSpec,
    kv_cache_dtype: str = "auto",
    tensor_parallel_size: int = 1,
    block_size: int = 16,
) -> KvReport:
    """Load ``model`` (an id, a path or a spec) and size its cache at a precision and TP degree."""
    from kvplan.analysis.timeline import hybrid_block_layout

    EngineConfig(block_size=block_size)  # vLLM's block sizes, as capacity and simulate check
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    from kvplan.costs.memory.kv_dtype_check import check_mla_latent

    # a hybrid model's pages in vLLM's raised attention block, as request and capacity use
    per_gpu, block = hybrid_block_layout(kv_spec(spec, kv_cache_dtype, tensor_parallel_size),
                                         block_size)
    check_mla_latent(per_gpu)
    return KvReport(
        model=spec,
        whole=kv_spec(spec, kv_cache_dtype, 1),
        per_gpu=per_gpu,
        block_size=block,
    )


def mla_block_note(spec: ModelSpec, block_size: int | None) -> None:
    """``kv`` and ``request`` know no GPU: where no --block-size was given, say which block
    size vLLM forces for MLA (DeepSeek-V3.2's 64 on every GPU is applied, and noted, by
    ``timeline.hybrid_block_layout`` itself)."""
    if spec.mla is None or spec.mla.index_head_dim or block_size is not None:
        return
    from kvplan.notes import note

    note(
        "blocks of 16 tokens (vLLM's default); for MLA vLLM 0.11 forces 64 on Hopper "
        "(FlashMLA) and 128 on Blackwell (CUTLASS MLA): pass --block-size 64 or 128 to see "
        "the claims there (kvplan capacity/simulate pick it from --gpu)")


def kv_report_for(
    spec: ModelSpec, kv_cache_dtype: str = "auto", tensor_parallel_size: int = 1,
    block_size: int = 16,
) -> KvReport:
    """Size a loaded model's cache at the given precision and TP degree."""
    return kv_report(spec, kv_cache_dtype, tensor_parallel_size, block_size)
