"""One summary row per bundled model, for `kvplan models`."""

from __future__ import annotations

from typing import NamedTuple

from kvplan.specs.catalog import catalog, load_model
from kvplan.specs.kv import kv_spec


class ModelRow(NamedTuple):
    """A catalog model at a glance."""

    id: str
    attention: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype: str
    bytes_per_token: int
    state_bytes_per_request: int
    latent_dim: int | None
    """MLA: elements of the one latent cached per token per layer (kv_lora_rank + rope dim);
    then kv_heads is 1 and head_dim the latent width, not hidden_size / heads."""
    latent_parts: str | None
    """MLA: the latent's two parts, e.g. '512 + 64' (kv_lora_rank + qk_rope_head_dim)."""


def catalog_rows() -> list[ModelRow]:
    """Every bundled model with its attention kind and KV bytes per token at its own dtype."""
    rows = []
    for entry in catalog().values():
        model = load_model(entry.hf_id)
        kv = kv_spec(model)
        mla = model.mla
        rows.append(
            ModelRow(
                id=model.name,
                attention=model.attention_kind,
                layers=model.num_layers,
                kv_heads=1 if mla else model.num_kv_heads,
                head_dim=mla.latent_dim if mla else model.head_dim,
                dtype=model.dtype,
                bytes_per_token=kv.bytes_per_token,
                state_bytes_per_request=kv.state_bytes_per_request,
                latent_dim=mla.latent_dim if mla else None,
                latent_parts=f"{mla.kv_lora_rank} + {mla.qk_rope_head_dim}" if mla else None,
            )
        )
    return rows
