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


def catalog_rows() -> list[ModelRow]:
    """Every bundled model with its attention kind and KV bytes per token at its own dtype."""
    rows = []
    for entry in catalog().values():
        model = load_model(entry.hf_id)
        kv = kv_spec(model)
        rows.append(
            ModelRow(
                id=model.name,
                attention=model.attention_kind,
                layers=model.num_layers,
                kv_heads=model.num_kv_heads,
                head_dim=model.head_dim,
                dtype=model.dtype,
                bytes_per_token=kv.bytes_per_token,
                state_bytes_per_request=kv.state_bytes_per_request,
            )
        )
    return rows
