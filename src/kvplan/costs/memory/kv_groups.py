"""vLLM 0.11's KV cache groups: per-layer specs, hybrid page alignment, equal-size groups.

One block = one page in every layer of a group; a request at max_model_len needs
``pages_per_request`` pages in each group (``check_enough_kv_cache_memory``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvplan.costs.memory import vllm_defaults as vd
from kvplan.costs.memory.settings import Settings
from kvplan.specs.kv import (
    LayerCacheSpec,
    MLASpec,
    ModelKv,
    SlidingWindowSpec,
    StateSpec,
    layer_cache_spec,
    model_precision,
    vllm_group_size,
)
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv, fmt_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """One KV cache group: layers of one spec (``None`` entries are vLLM's padding layers).

    ``block_size`` is the attention block for attention groups and vLLM's
    ``mamba_block_size`` (= max_model_len: one page holds a whole state) for state groups.
    """

    spec: LayerCacheSpec
    layer_ids: tuple[int, ...]
    block_size: int
    model_layers: int | None = None
    """DeepSeek-V3.2's one ``UniformTypeKVCacheSpecs`` group (latent + indexer pages): the
    whole model's layer count. vLLM 0.11 sizes every pipeline stage with num_blocks =
    available // that group's page, which sums all the model's layers, not the stage's
    (``get_kv_cache_config_from_groups``); None for other groups."""

    @property
    def page_size_bytes(self) -> int:
        return self.spec.page_size_bytes(self.block_size)

    def pages_per_request(self, s: Settings) -> int:
        """Pages one request at max_model_len needs (``max_memory_usage_bytes`` / page)."""
        spec = self.spec
        if isinstance(spec, StateSpec):
            return 1  # MambaSpec: cdiv(max_model_len, mamba_block_size = max_model_len) = 1
        if isinstance(spec, SlidingWindowSpec):
            tokens = min(spec.window - 1 + s.max_num_batched_tokens, s.max_model_len)
            return cdiv(tokens, self.block_size) + 1
        return cdiv(s.max_model_len, self.block_size)


def layer_specs(
    model: ModelSpec, s: Settings, stage: int | None = None, *, kv: ModelKv | None = None
) -> list[tuple[int, LayerCacheSpec]]:
    """(layer id, spec) of every cache-holding layer on pipeline stage ``stage``'s GPU
    (None: the stage with the most layers); ``kv``: the resolved per-GPU layout to read."""
    from kvplan.costs.memory.params import pp_layer_ranges

    ranges = pp_layer_ranges(model.num_layers, s.pp)
    layers = max(ranges, key=len) if stage is None else ranges[stage]
    if kv is not None:
        on_stage = set(layers)
        return sorted((i, g.spec) for g in kv.groups for i in g.layer_ids if i in on_stage)
    precision = model_precision(model, s.kv_cache_dtype)
    out = []
    for i in layers:
        spec = layer_cache_spec(
            model,
            i,
            precision,
            s.tp,
            mamba_cache_dtype=s.mamba_cache_dtype,
            mamba_ssm_cache_dtype=s.mamba_ssm_cache_dtype,
        )
        if spec is not None:
            out.append((i, spec))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridBlock:
    """vLLM 0.11 ``HybridAttentionMambaModelConfig.verify_and_update_config`` for one model."""

    block_size: int
    """Attention block: the user's --block-size, raised to ``aligned_block_size`` if smaller."""
    aligned_block_size: int
    """alignment x cdiv(state page, alignment x attention bytes per token)."""
    state_page_bytes: int
    """The unpadded state page (vLLM ``MambaSpec(...).page_size_bytes``)."""
    page_size_padded: int | None
    """``mamba_page_size_padded``: block_size x attention bytes per token, None if equal."""

    @property
    def padding_pct(self) -> float:
        """vLLM's "Padding mamba page size by X% to ensure ... exactly equal"."""
        if self.page_size_padded is None:
            return 0.0
        return 100 * (self.page_size_padded - self.state_page_bytes) / self.state_page_bytes


def hybrid_block(specs: Sequence[LayerCacheSpec], block: int) -> HybridBlock | None:
    """The attention block size and state padding of a hybrid attention + state model
    (None when the model is not hybrid)::

        attn_block = 16 x cdiv(state_page, 16 x attn_page_size_1_token)
        block      = attn_block if --block-size < attn_block else --block-size
        padded     = block x attn_page_size_1_token     (the state page is padded to it)
    """
    states = [sp for sp in specs if isinstance(sp, StateSpec)]
    attn = [sp for sp in specs if not isinstance(sp, StateSpec)]
    if not states or not attn:
        return None
    state_page = max(sp.state_bytes for sp in states)  # vLLM builds one model-wide MambaSpec
    per_token = max(sp.page_size_bytes(1) for sp in attn)
    align = vd.HYBRID_KERNEL_BLOCK_ALIGNMENT
    aligned = align * cdiv(state_page, align * per_token)
    block = max(block, aligned)
    padded = block * per_token
    return HybridBlock(
        block_size=block,
        aligned_block_size=aligned,
        state_page_bytes=state_page,
        page_size_padded=None if padded == state_page else padded,
    )


def build_groups(
    specs: Sequence[tuple[int, LayerCacheSpec]], block: int, max_model_len: int
) -> tuple[Group, ...]:
    """vLLM's grouping: one group if all layers match, else equal-size groups per spec
    (``_get_kv_cache_groups_uniform_page_size``), after the hybrid page alignment."""
    hybrid = hybrid_block([sp for _, sp in specs], block)
    if hybrid is not None:
        block = hybrid.block_size
    by_spec: dict[LayerCacheSpec, list[int]] = {}
    for layer, spec in specs:
        if isinstance(spec, StateSpec) and hybrid is not None:
            spec = replace(spec, page_size_padded=hybrid.page_size_padded)
        by_spec.setdefault(spec, []).append(layer)
    size = vllm_group_size([len(v) for v in by_spec.values()])
    uniform_type = len(by_spec) == 1 and any(
        isinstance(sp, MLASpec) and sp.indexer_dim for sp in by_spec)
    groups = []
    for spec, layers in by_spec.items():
        n = cdiv(len(layers), size)
        spec_block = max_model_len if isinstance(spec, StateSpec) else block
        groups += [
            Group(spec=spec, layer_ids=tuple(layers[i::n]), block_size=spec_block,
                  model_layers=len(layers) if uniform_type else None) for i in range(n)
        ]
    return tuple(groups)


def stage_groups(groups: Sequence[Group], layers: range) -> tuple[Group, ...]:
    """The whole model's groups as one pipeline stage holds them (vLLM 0.11
    ``get_kv_cache_configs``: groups are formed from every stage's layers, then each worker
    keeps its own layers of each group; a group may be empty on a stage and still takes a
    block per block of tokens)."""
    return tuple(replace(g, layer_ids=tuple(i for i in g.layer_ids if i in layers))
                 for g in groups)


def needed_bytes(groups: Sequence[Group], s: Settings) -> int:
    """vLLM's check_enough_kv_cache_memory: every layer's max usage for one request."""
    return sum(len(g.layer_ids) * g.pages_per_request(s) * g.page_size_bytes for g in groups)


def none_fits(groups: Sequence[Group], s: Settings) -> str:
    """Why not even max_model_len 1 fits: one block per layer, or (sliding-window: 2 pages from
    the first token; state: the whole state page) the pages a 1-token request takes."""
    one = replace(s, max_model_len=1)
    pages = sum(len(g.layer_ids) * g.pages_per_request(one) for g in groups)
    if pages == sum(len(g.layer_ids) for g in groups) and not any(
            isinstance(g.spec, StateSpec) for g in groups):
        return f"not even one block of {groups[0].block_size} tokens fits"
    return (f"not even a 1-token request fits: it takes {pages:,} pages of "
            f"{fmt_bytes(groups[0].page_size_bytes)} = {fmt_bytes(needed_bytes(groups, one))}")
