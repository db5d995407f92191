"""A batch's cache footprint, and the lever table: how GQA/MLA, precision and TP multiply it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.errors import InputError
from kvplan.limits import MAX_BATCH, MAX_TOKENS
from kvplan.specs.kv import ModelKv, kv_spec
from kvplan.specs.model import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchFootprint:
    """KV bytes for ``batch`` requests each holding ``context_tokens`` tokens."""

    batch: int
    context_tokens: int
    bytes_per_request: int
    kv: ModelKv

    @property
    def total_bytes(self) -> int:
        return self.batch * self.bytes_per_request


@dataclass(frozen=True, slots=True, kw_only=True)
class FootprintTerm:
    """One layer group's share of a request: bytes/token x tokens held, or a fixed state."""

    label: str
    num_layers: int
    bytes_per_token: int
    tokens_held: int
    state_bytes: int

    @property
    def bytes(self) -> int:
        return self.bytes_per_token * self.tokens_held + self.state_bytes


def footprint_terms(fp: BatchFootprint) -> tuple[FootprintTerm, ...]:
    """One term per layer group; the terms add up to ``bytes_per_request``."""
    return tuple(
        FootprintTerm(label=g.spec.label, num_layers=g.num_layers,
                      bytes_per_token=g.bytes_per_token,
                      tokens_held=g.spec.tokens_held(fp.context_tokens) if g.bytes_per_token else 0,
                      state_bytes=g.state_bytes)
        for g in fp.kv.groups
    )


def batch_footprint(kv: ModelKv, batch: int, context_tokens: int,
                    max_tokens: int | None = None) -> BatchFootprint:
    """total = batch x bytes_for(context) (= bytes/token x context x batch for full attention).

    ``max_tokens``: the model's context; a longer context is refused."""
    from kvplan.costs.memory.kv_dtype_check import check_mla_latent

    check_mla_latent(kv)
    if batch < 1:
        raise InputError(f"--batch must be at least 1, got {batch}")
    if context_tokens < 1:
        raise InputError(f"--context must be at least 1 token, got {context_tokens}")
    if context_tokens > MAX_TOKENS:  # the flag first: the web page shows it by its field
        raise InputError(f"--context must be at most {MAX_TOKENS:,} tokens, got {context_tokens}")
    if batch > MAX_BATCH:
        raise InputError(f"--batch must be at most {MAX_BATCH:,} requests, got {batch}")
    if max_tokens is not None and context_tokens > max_tokens:
        raise InputError(f"--context {context_tokens:,} exceeds the model's context of "
                         f"{max_tokens:,} tokens (max_position_embeddings)")
    return BatchFootprint(
        batch=batch,
        context_tokens=context_tokens,
        bytes_per_request=kv.bytes_for(context_tokens),
        kv=kv,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LeverRow:
    """One configuration in the lever table."""

    lever: str
    kv_heads: str
    precision: str
    tensor_parallel_size: int
    bytes_per_token_per_gpu: int
    total_bytes_per_gpu: int
    factor_vs_baseline: float


def mha_counterfactual(model: ModelSpec) -> ModelSpec:
    """The same model with full multi-head attention: kv heads = attention heads, no MLA."""
    head_k = (
        model.head_dim
        if model.mla is None
        else (model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim)
    )
    kinds = tuple("full" if k == "mla" else k for k in model.layer_kinds)
    return dataclasses.replace(
        model, num_kv_heads=model.num_attention_heads, mla=None, head_dim=head_k, layer_kinds=kinds
    )


LEVER_PRECISIONS = ("fp8", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head", "nvfp4")
"""Cache precisions the lever table compares with the model's own dtype."""


LEVER_TP_DEGREES = (2, 4, 8)
"""Tensor-parallel degrees the lever table tries (those vLLM would start the model at)."""


def levers_note(model: ModelSpec) -> str:
    """How the table's factors combine for this model (the rule the rows follow)."""
    from kvplan.specs.model import STATE_KINDS

    if model.mla is not None:
        text = ("Factors multiply: MLA x cache precision; TP does not divide MLA's latent "
                "(every GPU holds it whole).")
    else:
        text = ("Factors multiply: KV heads (GQA/MQA vs MHA) x cache precision x 1/TP (until TP "
                "exceeds the KV heads, where heads are replicated instead of split).")
    if set(model.layer_kinds) & STATE_KINDS:
        text += (" The state layers' fixed per-request state keeps its own dtype "
                 "(--mamba-cache-dtype): cache precision shrinks only the attention layers.")
    return text


def servable_tp_degrees(model: ModelSpec, degrees: tuple[int, ...] = LEVER_TP_DEGREES
                        ) -> tuple[int, ...]:
    """The degrees vLLM accepts for this model (heads divide; KV heads split or replicate)."""
    from kvplan.errors import InputError
    from kvplan.specs.kv import check_tensor_parallel

    ok = []
    for tp in degrees:
        try:
            check_tensor_parallel(model, tp)
        except InputError:
            continue
        ok.append(tp)
    return tuple(ok)


def _storable(model: ModelSpec, precisions: tuple[str, ...]) -> tuple[str, ...]:
    """Only what vLLM stores for the model: an MLA latent in 16 bits or per-tensor fp8, nvfp4
    only for heads its 16-value groups pack (``kv_dtype_check``)."""
    from kvplan.costs.memory.kv_dtype_check import fp4_head_problem, mla_stores
    from kvplan.specs.kv import model_precision

    if model.mla is not None:
        return tuple(p for p in precisions if mla_stores(model_precision(model, p)))
    heads = (model.head_dim, model.v_head_dim)
    return tuple(p for p in precisions
                 if fp4_head_problem(model_precision(model, p), heads) is None)


def lever_table(
    model: ModelSpec,
    batch: int,
    context_tokens: int,
    *,
    precisions: tuple[str, ...] = LEVER_PRECISIONS,
    tp_degrees: tuple[int, ...] | None = None,
) -> tuple[LeverRow, ...]:
    """Rows: MHA baseline, the model's own heads, each precision, each TP, and all stacked;
    ``tp_degrees`` None: those of 2, 4, 8 vLLM serves the model at, as `kvplan levers` shows."""
    if tp_degrees is None:
        tp_degrees = servable_tp_degrees(model)
    baseline = mha_counterfactual(model)
    heads = "MLA latent" if model.mla else f"{model.num_kv_heads} ({model.attention_kind})"
    precisions = _storable(model, precisions)
    configs = [
        (
            "MHA counterfactual (kv heads = attention heads)",
            baseline,
            f"{model.num_attention_heads} (MHA)",
            "auto",
            1,
        ),
        ("model as configured", model, heads, "auto", 1),
    ]
    configs += [(f"KV cache dtype {p}", model, heads, p, 1) for p in precisions]
    configs += [(f"tensor parallel {tp}", model, heads, "auto", tp) for tp in tp_degrees]
    if precisions and tp_degrees:
        configs.append(
            (
                f"stacked: {precisions[0]} + TP {tp_degrees[0]}",
                model,
                heads,
                precisions[0],
                tp_degrees[0],
            )
        )
    limit = model.context_limit
    base_total = batch_footprint(kv_spec(baseline), batch, context_tokens, limit).total_bytes
    return tuple(
        _row(label, m, h, p, tp, batch, context_tokens, base_total)
        for label, m, h, p, tp in configs
    )


def _row(
    label: str,
    model: ModelSpec,
    heads: str,
    precision: str,
    tp: int,
    batch: int,
    context: int,
    base_total: int,
) -> LeverRow:
    kv = kv_spec(model, precision, tp)
    total = batch_footprint(kv, batch, context).total_bytes
    return LeverRow(
        lever=label,
        kv_heads=heads,
        precision=kv.precision.name,
        tensor_parallel_size=tp,
        bytes_per_token_per_gpu=kv.bytes_per_token,
        total_bytes_per_gpu=total,
        factor_vs_baseline=total / base_total,
    )
