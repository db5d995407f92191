"""The KV formula written out with a model's own numbers, one line per layer group."""

from __future__ import annotations

from kvplan.specs.kv import KvGroup, KvPrecision, MLASpec, ModelKv, StateSpec
from kvplan.specs.kv_precision import FP8_DS_MLA
from kvplan.units import fmt_bytes


def value_bytes_text(precision: KvPrecision, n: int) -> str:
    """'2 bytes', '1 byte', or '(128 x 1 + 4 scale) bytes' for one head vector of n values."""
    per_vector = precision.vector_bytes(n)
    if precision.scale_bytes == 0 and per_vector % n == 0:
        width = per_vector // n
        return f"{width} byte{'s' if width != 1 else ''}"
    return f"({per_vector} bytes per {n}-value vector incl. scales)"


def group_formula(group: KvGroup, precision: KvPrecision) -> str:
    """The bytes-per-token (or per-request state) formula of one group, numbers filled in."""
    spec, n = group.spec, group.num_layers
    if spec.kind in ("full", "sliding"):
        h, d = spec.num_kv_heads, spec.head_size  # type: ignore[union-attr]
        tail = f" (window {spec.window} tokens)" if spec.kind == "sliding" else ""  # type: ignore[union-attr]
        return (
            f"2 (K and V) x {n} layers x {h} KV heads x {d} head_dim x "
            f"{value_bytes_text(precision, d)} = {group.bytes_per_token:,} bytes/token{tail}"
        )
    if isinstance(spec, MLASpec):
        return _mla_formula(spec, n, precision, group.bytes_per_token)
    assert isinstance(spec, StateSpec)
    return (
        f"{n} {spec.layer_type} layers x ({spec.formula}) = "
        f"{group.state_bytes:,} bytes per request (constant in length)"
    )


def _mla_formula(spec: MLASpec, n: int, precision: KvPrecision, total: int) -> str:
    """MLA's latent per layer; DeepSeek-V3.2's fp8_ds_mla latent and indexer key written out."""
    latent = spec.latent_dim
    if spec.precision.name == FP8_DS_MLA.name:
        per = f"{spec.latent_bytes} B fp8_ds_mla latent ({latent} values)"
    else:
        per = (f"{latent} latent (kv_lora_rank + qk_rope_head_dim) x "
               f"{value_bytes_text(precision, latent)}")
    if not spec.indexer_dim:
        return f"{n} layers x {per} = {total:,} bytes/token (no K/V factor of 2)"
    return (f"{n} layers x ({per} + {spec.indexer_bytes} B indexer key) = {total:,} "
            "bytes/token (no K/V factor of 2)")


def kv_summary_lines(kv: ModelKv) -> list[str]:
    """Every group's formula, then the total per token and per request state."""
    lines = [group_formula(g, kv.precision) for g in kv.groups]
    lines.append(f"total: {kv.bytes_per_token:,} bytes/token ({fmt_bytes(kv.bytes_per_token)})")
    if kv.state_bytes_per_request:
        lines.append(
            f"fixed state: {kv.state_bytes_per_request:,} bytes per request "
            f"({fmt_bytes(kv.state_bytes_per_request)})"
        )
    return lines
